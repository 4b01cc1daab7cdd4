// Whether this user can load the libraries ppctl-torch needs: the light `ppctl` checks the LibTorch library
// recorded at build time before it execs ppctl-torch, so that an install whose libraries sit in a folder this
// user cannot read (another user's home) is named, instead of the loader's bare exit 127.
#pragma once

#include <optional>
#include <string>

namespace ppctl::launch {

/// Why the user of this process (its real uid, as access(2) checks) cannot load the shared library file
/// `library` (an absolute path): the first folder on its path that does not exist or that the user may not
/// search (named with its mode and owner), or the file itself missing or unreadable. nullopt when the user
/// can read it, when `library` is empty (no path was recorded), or when a folder of `ld_library_path`
/// (LD_LIBRARY_PATH, colon-separated; null or empty: none) holds a readable file of the same name, which
/// the loader takes first. The text names the library's folder and the cause and ends with the fix: an
/// install every user can read (`PPCTL_VENV=/opt/ppctl/venv scripts/setup.sh`, then a build against it), or
/// making the venv again when it is gone. Never throws.
std::optional<std::string> library_unreachable(const std::string& library, const char* ld_library_path);

}  // namespace ppctl::launch
