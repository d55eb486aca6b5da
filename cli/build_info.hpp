#pragma once
// What `payrecon --version` says of the build: the commit the sources were built from (12 hex
// digits, with "-dirty" if tracked files differed from it; "unknown" outside a git checkout),
// written at build time by cmake/build_info.cmake into the build directory.

namespace payrecon {

const char* build_commit();

} // namespace payrecon
