// GLOO_SOCKET_IFNAME: parsed and checked against this machine's interfaces.
#include "comm/socket_interface.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <net/if.h>

#include "core/bad_input.hpp"

namespace ppctl::comm {
namespace {

/// The names of this machine's network interfaces (if_nameindex), in the kernel's order.
std::vector<std::string> machine_interfaces() {
  std::vector<std::string> names;
  if (struct if_nameindex* list = if_nameindex()) {
    for (const struct if_nameindex* it = list; it->if_index != 0; ++it) names.emplace_back(it->if_name);
    if_freenameindex(list);
  }
  return names;
}

}  // namespace

std::vector<std::string> gloo_socket_interfaces(const EnvMap& env) {
  const auto found = env.find(kGlooInterfaceVariable);
  if (found == env.end() || found->second.empty()) return {};
  const std::string& value = found->second;
  std::vector<std::string> names;
  size_t begin = 0;
  while (true) {
    const size_t comma = value.find(',', begin);
    names.push_back(value.substr(begin, comma == std::string::npos ? std::string::npos : comma - begin));
    if (comma == std::string::npos) break;
    begin = comma + 1;
  }
  for (const auto& name : names) {
    if (!name.empty() && if_nametoindex(name.c_str()) != 0) continue;
    throw AddressError(fmt::format(
        "{}='{}': {} (this machine has: {}; fix: name one of them, comma-separated for several, or unset "
        "{} to use the address this machine's hostname resolves to)",
        kGlooInterfaceVariable, value,
        name.empty() ? std::string("an interface name is empty")
                     : fmt::format("this machine has no network interface '{}'", name),
        fmt::join(machine_interfaces(), ", "), kGlooInterfaceVariable));
  }
  return names;
}

}  // namespace ppctl::comm
