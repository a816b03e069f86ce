// Symbol visibility of the public API: the shared library (-DBUILD_SHARED_LIBS=ON) is built with
// every other symbol hidden.
#pragma once

#if defined(_WIN32)
#define TQ_API
#else
#define TQ_API __attribute__((visibility("default")))
#endif
