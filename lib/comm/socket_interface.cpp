// GLOO_SOCKET_IFNAME: parsed and checked against this machine's interfaces.
#include "comm/socket_interface.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <sys/socket.h>

#include <algorithm>

#include "core/bad_input.hpp"

namespace ppctl::comm {
namespace {

/// The names of this machine's network interfaces that have an IPv4 or IPv6 address (getifaddrs), in
/// the kernel's order, each once: the ones Gloo can bind to.
std::vector<std::string> interfaces_with_address() {
  std::vector<std::string> names;
  struct ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return names;
  for (const struct ifaddrs* it = list; it != nullptr; it = it->ifa_next) {
    if (it->ifa_addr == nullptr) continue;
    const int family = it->ifa_addr->sa_family;
    if (family != AF_INET && family != AF_INET6) continue;
    if (std::find(names.begin(), names.end(), it->ifa_name) == names.end()) names.emplace_back(it->ifa_name);
  }
  freeifaddrs(list);
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
  const auto usable = interfaces_with_address();
  for (const auto& name : names) {
    if (std::find(usable.begin(), usable.end(), name) != usable.end()) continue;
    throw AddressError(fmt::format(
        "{}='{}': {} (this machine has: {}; fix: name one of them, comma-separated for several, or unset "
        "{} to use the address this machine's hostname resolves to)",
        kGlooInterfaceVariable, value,
        name.empty()                          ? std::string("an interface name is empty")
        : if_nametoindex(name.c_str()) == 0 ? fmt::format("this machine has no network interface '{}'", name)
                                              : fmt::format("network interface '{}' has no address", name),
        fmt::join(usable, ", "), kGlooInterfaceVariable));
  }
  return names;
}

}  // namespace ppctl::comm
