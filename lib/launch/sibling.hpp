// The running executable and the hand-over to an executable beside it: the light `ppctl` runs every command
// but `plan` by replacing itself (exec) with `ppctl-torch` from its own folder.
#pragma once

#include <string>

namespace ppctl::launch {

/// The absolute path of the running executable, as the kernel started it (/proc/self/exe: symbolic links
/// resolved). Throws ppctl::LaunchError when /proc/self/exe cannot be read.
std::string self_executable();

/// Replaces this process with the executable `name` in the folder of the running executable
/// (self_executable()'s, so a link to ppctl elsewhere on PATH still finds it; PATH is never searched).
/// execv: the pid, `argv` (argv[0] included, so help text names the command as the user typed it), the
/// environment, signal dispositions and mask and open descriptors stay. Returns only when that fails: the
/// message to show, naming the path, why it failed (missing, not executable, errno) and the fix.
std::string exec_sibling(const std::string& name, char** argv);

}  // namespace ppctl::launch
