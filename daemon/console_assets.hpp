#pragma once
// The web console's files (daemon/console/), embedded in the executable by
// daemon/console/embed.cmake.
#include <string_view>

namespace baton::daemon {

extern const std::string_view console_html;  ///< index.html, served at /
extern const std::string_view console_css;   ///< console.css
extern const std::string_view console_js;    ///< console.js

}  // namespace baton::daemon
