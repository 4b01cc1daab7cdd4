// The network interfaces Gloo binds to, chosen by the user through GLOO_SOCKET_IFNAME. No torch.
#pragma once

#include <string>
#include <vector>

#include "comm/launch_env.hpp"

namespace ppctl::comm {

/// The variable naming Gloo's interfaces, as PyTorch's own Gloo process group reads it.
inline constexpr const char* kGlooInterfaceVariable = "GLOO_SOCKET_IFNAME";

/// The interface names in `env`'s GLOO_SOCKET_IFNAME: a comma-separated list ("eth0" or
/// "eth0,eth1"; each name gives Gloo one device, as torch.distributed does), in order; empty when the
/// variable is unset or empty (Gloo then binds to the address this machine's hostname resolves to).
/// Throws AddressError when a name is empty, this machine has no interface of that name, or the
/// interface has no IPv4/IPv6 address (Gloo could not bind to it): the message names the variable, the
/// value, the interfaces this machine has with an address (getifaddrs), and the fix.
std::vector<std::string> gloo_socket_interfaces(const EnvMap& env);

}  // namespace ppctl::comm
