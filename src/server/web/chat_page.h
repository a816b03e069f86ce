// The chat page served at "/": one self-contained HTML document (markup, style and script inline;
// nothing is fetched from elsewhere at run time), compiled into the binary.
#pragma once

#include <string_view>

namespace tq::server {

std::string_view ChatPageHtml();

}  // namespace tq::server
