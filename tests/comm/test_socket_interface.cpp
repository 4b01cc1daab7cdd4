// Tests of comm/socket_interface: GLOO_SOCKET_IFNAME lists, and the error for names this machine lacks.
#include <catch2/catch_test_macros.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>

#include <string>
#include <vector>

#include "comm/socket_interface.hpp"
#include "core/bad_input.hpp"

using namespace ppctl;
using Catch::Matchers::ContainsSubstring;

TEST_CASE("GLOO_SOCKET_IFNAME unset or empty leaves the choice to Gloo", "[comm]") {
  CHECK(comm::gloo_socket_interfaces({}).empty());
  CHECK(comm::gloo_socket_interfaces({{"GLOO_SOCKET_IFNAME", ""}}).empty());
}

TEST_CASE("GLOO_SOCKET_IFNAME names interfaces in order, comma-separated", "[comm]") {
  // Every Linux machine (and network namespace) has the loopback interface 'lo'.
  CHECK(comm::gloo_socket_interfaces({{"GLOO_SOCKET_IFNAME", "lo"}}) == std::vector<std::string>{"lo"});
  CHECK(comm::gloo_socket_interfaces({{"GLOO_SOCKET_IFNAME", "lo,lo"}}) ==
        std::vector<std::string>{"lo", "lo"});
}

TEST_CASE("GLOO_SOCKET_IFNAME with a name this machine lacks is bad input naming it", "[comm]") {
  for (const std::string value : {"nosuch0", "lo,nosuch0", "lo,", ",lo"}) {
    INFO(value);
    try {
      comm::gloo_socket_interfaces({{"GLOO_SOCKET_IFNAME", value}});
      FAIL("accepted");
    } catch (const AddressError& e) {
      CHECK(is_bad_input(e));
      const std::string message = e.what();
      CHECK_THAT(message, ContainsSubstring("GLOO_SOCKET_IFNAME='" + value + "'"));
      CHECK_THAT(message, ContainsSubstring("this machine has: lo"));
      CHECK_THAT(message, ContainsSubstring(value.find("nosuch0") != std::string::npos
                                                ? "no network interface 'nosuch0'"
                                                : "an interface name is empty"));
    }
  }
}
