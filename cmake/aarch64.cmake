# Cross-compiling for aarch64 with Debian's g++-aarch64-linux-gnu (scripts/cross-aarch64.sh).
# Header-only dependencies (fmt, nlohmann-json) come from the build machine: only static
# libraries are built, nothing is linked.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)
set(CMAKE_FIND_ROOT_PATH /usr/aarch64-linux-gnu)
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY BOTH)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE BOTH)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE BOTH)
# fmt's package files are per architecture; use the build machine's (its headers are portable, and
# its library is never linked here). /usr/include then comes after the cross compiler's own.
set(fmt_DIR /usr/lib/x86_64-linux-gnu/cmake/fmt CACHE PATH "")
set(CMAKE_CXX_FLAGS_INIT "-idirafter /usr/include")
set(CMAKE_NO_SYSTEM_FROM_IMPORTED ON)
