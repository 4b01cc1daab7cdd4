// Tests of comm/launch_env and comm/hostlist: launch-mode detection, torchrun and Slurm identities,
// missing or contradictory variables, Slurm host-list expansion.
#include <catch2/catch_test_macros.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>

#include <string>
#include <utility>
#include <vector>

#include "comm/hostlist.hpp"
#include "comm/launch_env.hpp"
#include "core/error.hpp"

using namespace ppctl;
using Catch::Matchers::ContainsSubstring;
using comm::EnvMap;
using comm::LaunchMode;

namespace {

EnvMap torchrun(int rank, int world) {
  return {{"RANK", std::to_string(rank)},
          {"WORLD_SIZE", std::to_string(world)},
          {"LOCAL_RANK", std::to_string(rank % 2)},
          {"MASTER_ADDR", "127.0.0.1"},
          {"MASTER_PORT", "29500"}};
}

EnvMap slurm(int procid, int ntasks) {
  return {{"SLURM_PROCID", std::to_string(procid)},
          {"SLURM_NTASKS", std::to_string(ntasks)},
          {"SLURM_LOCALID", std::to_string(procid % 2)},
          {"SLURM_JOB_ID", "123456"},
          {"SLURM_STEP_ID", "0"},
          {"SLURM_JOB_NODELIST", "gpu[07-08],cpu1"}};
}

/// The message external_identity throws for `env`.
std::string failure(const EnvMap& env) {
  try {
    comm::external_identity(env, comm::detect_launch_mode(env));
  } catch (const CommError& e) {
    return e.what();
  }
  FAIL("no error for a bad environment");
  return "";
}

}  // namespace

TEST_CASE("launch mode: torchrun variables win over Slurm's; neither means the local launcher") {
  CHECK(comm::detect_launch_mode({}) == LaunchMode::Local);
  CHECK(comm::detect_launch_mode({{"PATH", "/bin"}, {"SLURM_JOB_ID", "5"}}) == LaunchMode::Local);
  CHECK(comm::detect_launch_mode(slurm(0, 4)) == LaunchMode::Slurm);
  auto batch_script = slurm(0, 4);  // sbatch's own shell: no job step
  batch_script.erase("SLURM_STEP_ID");
  CHECK(comm::detect_launch_mode(batch_script) == LaunchMode::Local);
  CHECK(comm::detect_launch_mode(torchrun(1, 4)) == LaunchMode::Torchrun);
  auto both = slurm(3, 4);
  both.merge(torchrun(1, 2));
  CHECK(comm::detect_launch_mode(both) == LaunchMode::Torchrun);
  CHECK(comm::detect_launch_mode({{"WORLD_SIZE", "2"}}) == LaunchMode::Torchrun);
}

TEST_CASE("torchrun identity: rank, world size, local rank, address; rank 0 hosts the store") {
  for (int rank = 0; rank < 4; ++rank) {
    const auto info = comm::external_identity(torchrun(rank, 4), LaunchMode::Torchrun);
    CHECK(info.rank == rank);
    CHECK(info.world_size == 4);
    CHECK(info.local_rank == rank % 2);
    CHECK(info.master_addr == "127.0.0.1");
    CHECK(info.master_port == 29500);
    CHECK(info.host_store == (rank == 0));
  }
  auto no_local = torchrun(1, 2);
  no_local.erase("LOCAL_RANK");
  CHECK(comm::external_identity(no_local, LaunchMode::Torchrun).local_rank == 0);
  // The local launcher's workers never host the store.
  CHECK_FALSE(comm::local_worker_identity(torchrun(0, 2)).host_store);
}

TEST_CASE("torchrun identity: with torchrun's agent store every rank joins it, keys per restart attempt") {
  for (int rank = 0; rank < 2; ++rank) {
    auto env = torchrun(rank, 2);
    env["TORCHELASTIC_USE_AGENT_STORE"] = "True";
    env["TORCHELASTIC_RESTART_COUNT"] = "2";
    const auto info = comm::external_identity(env, LaunchMode::Torchrun);
    CHECK_FALSE(info.host_store);  // the agent holds MASTER_PORT
    CHECK(info.agent_store);
    CHECK(info.store_prefix == "/worker/attempt_2");
  }
  auto by_hand = torchrun(0, 2);
  by_hand["TORCHELASTIC_USE_AGENT_STORE"] = "False";
  const auto info = comm::external_identity(by_hand, LaunchMode::Torchrun);
  CHECK(info.host_store);
  CHECK_FALSE(info.agent_store);
  CHECK(info.store_prefix.empty());
}

TEST_CASE("torchrun identity: missing or contradictory variables name the variable and value") {
  auto no_world = torchrun(1, 4);
  no_world.erase("WORLD_SIZE");
  CHECK_THAT(failure(no_world), ContainsSubstring("WORLD_SIZE is not set"));
  auto no_rank = torchrun(1, 4);
  no_rank.erase("RANK");
  CHECK_THAT(failure(no_rank), ContainsSubstring("RANK is not set"));
  CHECK_THAT(failure(torchrun(4, 4)), ContainsSubstring("RANK='4' must be an integer in [0, 3]"));
  auto bad_port = torchrun(0, 2);
  bad_port["MASTER_PORT"] = "70000";
  CHECK_THAT(failure(bad_port), ContainsSubstring("MASTER_PORT='70000'"));
  auto text = torchrun(0, 2);
  text["WORLD_SIZE"] = "two";
  CHECK_THAT(failure(text), ContainsSubstring("WORLD_SIZE='two'"));
  auto no_addr = torchrun(0, 2);
  no_addr.erase("MASTER_ADDR");
  CHECK_THAT(failure(no_addr), ContainsSubstring("MASTER_ADDR is not set"));
}

TEST_CASE("launcher variables take the spec's one integer spelling: no '+', leading zeros or spaces") {
  for (const auto& [name, value] : std::vector<std::pair<std::string, std::string>>{
           {"WORLD_SIZE", "+2"}, {"WORLD_SIZE", "02"}, {"RANK", "00"}, {"RANK", " 1"}, {"RANK", "1 "},
           {"MASTER_PORT", "029500"}, {"LOCAL_RANK", "-0"}, {"WORLD_SIZE", "0x2"}}) {
    auto env = torchrun(1, 2);
    env[name] = value;
    CHECK_THAT(failure(env), ContainsSubstring(name + "='" + value + "' must be an integer in [") &&
                                 ContainsSubstring("written in plain decimal digits"));
  }
}

TEST_CASE("Slurm identity: SLURM_PROCID/NTASKS/LOCALID, first host of the node list, port from the job") {
  const auto info = comm::external_identity(slurm(2, 4), LaunchMode::Slurm);
  CHECK(info.rank == 2);
  CHECK(info.world_size == 4);
  CHECK(info.local_rank == 0);
  CHECK(info.master_addr == "gpu07");
  CHECK(info.master_port == comm::slurm_port(123456));
  CHECK(info.master_port == 20000 + 123456 % 20000);
  CHECK_FALSE(info.host_store);
  CHECK(comm::external_identity(slurm(0, 4), LaunchMode::Slurm).host_store);

  auto old_name = slurm(1, 4);
  old_name.erase("SLURM_JOB_NODELIST");
  old_name["SLURM_NODELIST"] = "n[3-4]";
  CHECK(comm::external_identity(old_name, LaunchMode::Slurm).master_addr == "n3");

  auto explicit_master = slurm(1, 4);
  explicit_master["MASTER_ADDR"] = "10.0.0.9";
  explicit_master["MASTER_PORT"] = "31000";
  const auto set = comm::external_identity(explicit_master, LaunchMode::Slurm);
  CHECK(set.master_addr == "10.0.0.9");
  CHECK(set.master_port == 31000);
}

TEST_CASE("workers per node: torchrun's LOCAL_WORLD_SIZE, Slurm's tasks per node, node by node") {
  auto env = torchrun(1, 8);
  CHECK(comm::external_identity(env, LaunchMode::Torchrun).ranks_per_node.empty());
  env["LOCAL_WORLD_SIZE"] = "4";
  const auto torchrun_info = comm::external_identity(env, LaunchMode::Torchrun);
  CHECK(torchrun_info.ranks_per_node == std::vector<int>{4});
  CHECK(torchrun_info.ranks_per_node_source == "LOCAL_WORLD_SIZE=4");
  auto s = slurm(1, 8);
  s["SLURM_TASKS_PER_NODE"] = "4(x2)";
  CHECK(comm::external_identity(s, LaunchMode::Slurm).ranks_per_node == std::vector<int>{4, 4});
  s["SLURM_STEP_TASKS_PER_NODE"] = "3,5";  // the step's own layout wins over the allocation's
  const auto step = comm::external_identity(s, LaunchMode::Slurm);
  CHECK(step.ranks_per_node == std::vector<int>{3, 5});
  CHECK(step.ranks_per_node_source == "SLURM_STEP_TASKS_PER_NODE=3,5");
  auto allocation = slurm(1, 4);  // an allocation of 8 tasks, a step of 4: its layout unknown, nothing claimed
  allocation["SLURM_TASKS_PER_NODE"] = "4(x2)";
  CHECK(comm::external_identity(allocation, LaunchMode::Slurm).ranks_per_node.empty());
  CHECK(comm::parse_tasks_per_node("8") == std::vector<int>{8});
  CHECK(comm::parse_tasks_per_node("8(x3),2") == std::vector<int>{8, 8, 8, 2});
  CHECK(comm::parse_tasks_per_node("2(x2),8(x1)") == std::vector<int>{2, 2, 8});
  for (const char* bad : {"", "x", "4(3)", "4(x2", "4,,2", "4 ", "-1", "0", "0(x2)", "4(x0)", "4,", "garbage"}) {
    INFO(bad);
    CHECK_FALSE(comm::parse_tasks_per_node(bad).has_value());
  }
}

TEST_CASE("Slurm tasks per node: a malformed list, or a step's list that is not SLURM_NTASKS tasks, is refused") {
  auto garbage = slurm(0, 4);
  garbage["SLURM_STEP_TASKS_PER_NODE"] = "garbage";
  CHECK_THROWS_WITH(comm::external_identity(garbage, LaunchMode::Slurm),
                    Catch::Matchers::ContainsSubstring("SLURM_STEP_TASKS_PER_NODE='garbage' is not Slurm's list of "
                                                       "tasks per node"));
  auto more = slurm(0, 4);
  more["SLURM_STEP_TASKS_PER_NODE"] = "2(x3)";
  CHECK_THROWS_WITH(comm::external_identity(more, LaunchMode::Slurm),
                    Catch::Matchers::ContainsSubstring("SLURM_STEP_TASKS_PER_NODE='2(x3)' lists 6 tasks but "
                                                       "SLURM_NTASKS is 4"));
  auto zero = slurm(0, 4);
  zero["SLURM_TASKS_PER_NODE"] = "0(x2)";
  CHECK_THROWS_WITH(comm::external_identity(zero, LaunchMode::Slurm),
                    Catch::Matchers::ContainsSubstring("SLURM_TASKS_PER_NODE='0(x2)' is not Slurm's list"));
}

TEST_CASE("Slurm identity: bad variables name the variable and value") {
  CHECK_THAT(failure(slurm(4, 4)), ContainsSubstring("SLURM_PROCID='4' must be an integer in [0, 3]"));
  auto no_tasks = slurm(0, 4);
  no_tasks.erase("SLURM_NTASKS");
  CHECK_THAT(failure(no_tasks), ContainsSubstring("SLURM_NTASKS is not set"));
  auto no_nodes = slurm(0, 4);
  no_nodes.erase("SLURM_JOB_NODELIST");
  CHECK_THAT(failure(no_nodes), ContainsSubstring("SLURM_JOB_NODELIST"));
  auto no_job = slurm(0, 4);
  no_job.erase("SLURM_JOB_ID");
  CHECK_THAT(failure(no_job), ContainsSubstring("SLURM_JOB_ID is not set"));
  auto bad_list = slurm(0, 4);
  bad_list["SLURM_JOB_NODELIST"] = "node[01-03";
  CHECK_THAT(failure(bad_list), ContainsSubstring("SLURM_JOB_NODELIST='node[01-03'"));
}

TEST_CASE("job identity: the same on every rank of a job, different for another job") {
  const auto id = [](const EnvMap& env) {
    return comm::external_identity(env, comm::detect_launch_mode(env)).job_id;
  };
  CHECK(id(slurm(0, 4)) == id(slurm(3, 4)));
  CHECK_THAT(id(slurm(0, 4)), ContainsSubstring("123456"));
  auto other_job = slurm(1, 4);  // job ids 20000 apart share slurm_port
  other_job["SLURM_JOB_ID"] = "143456";
  CHECK(comm::slurm_port(123456) == comm::slurm_port(143456));
  CHECK(id(other_job) != id(slurm(1, 4)));
  auto other_step = slurm(1, 4);
  other_step["SLURM_STEP_ID"] = "1";
  CHECK(id(other_step) != id(slurm(1, 4)));
  CHECK(id(slurm(0, 2)) != id(slurm(0, 4)));  // the world size is part of it

  CHECK(id(torchrun(0, 4)) == id(torchrun(2, 4)));
  auto run = torchrun(2, 4);
  run["TORCHELASTIC_RUN_ID"] = "exp7";
  CHECK(id(run) != id(torchrun(2, 4)));
  auto restarted = run;
  restarted["TORCHELASTIC_RESTART_COUNT"] = "1";
  CHECK(id(restarted) != id(run));

  auto chosen = slurm(1, 4);  // PPCTL_JOB_ID wins in every mode
  chosen["PPCTL_JOB_ID"] = "mine";
  CHECK(id(chosen) == "mine");
  auto local = torchrun(1, 2);
  CHECK(comm::local_worker_identity(local).job_id.empty());
  local["PPCTL_JOB_ID"] = "local 12-ab";
  CHECK(comm::local_worker_identity(local).job_id == "local 12-ab");
  CHECK(comm::local_worker_identity(local).mode == LaunchMode::Local);
  CHECK(comm::external_identity(torchrun(1, 2), LaunchMode::Torchrun).mode == LaunchMode::Torchrun);
}

TEST_CASE("host lists expand like scontrol show hostnames") {
  using V = std::vector<std::string>;
  CHECK(comm::expand_hostlist("node01") == V{"node01"});
  CHECK(comm::expand_hostlist("node[01-03,07],gpu5") == V{"node01", "node02", "node03", "node07", "gpu5"});
  CHECK(comm::expand_hostlist("n[8-11]") == V{"n8", "n9", "n10", "n11"});
  CHECK(comm::expand_hostlist("n[098-101]") == V{"n098", "n099", "n100", "n101"});
  CHECK(comm::expand_hostlist("r[1-2]n[1-2]") == V{"r1n1", "r1n2", "r2n1", "r2n2"});
  CHECK(comm::expand_hostlist("a[1,3]-ib,b") == V{"a1-ib", "a3-ib", "b"});
  for (const char* bad : {"", "n[1-", "n1]", "n[a-b]", "n[3-1]", "a,,b", "n[[1]]", "n[]"}) {
    CAPTURE(bad);
    CHECK_THROWS_AS(comm::expand_hostlist(bad), CommError);
  }
  try {
    comm::expand_hostlist("n[3-1]", "SLURM_NODELIST");
    FAIL("no error for a decreasing range");
  } catch (const CommError& e) {
    CHECK_THAT(std::string(e.what()), ContainsSubstring("SLURM_NODELIST='n[3-1]'") &&
                                          ContainsSubstring("ends below its start"));
  }
}

TEST_CASE("rank lists are written compressed: runs of consecutive ranks as ranges") {
  CHECK(ppctl::comm::rank_list({1}) == "rank 1");
  CHECK(ppctl::comm::rank_list({1, 2, 3, 4, 5, 6, 7}) == "ranks 1-7");
  CHECK(ppctl::comm::rank_list({9, 0, 3, 2, 4, 3}) == "ranks 0, 2-4, 9");
  CHECK(ppctl::comm::rank_list({1, 3}) == "ranks 1, 3");
  CHECK(ppctl::comm::rank_list({}) == "no rank");
  CHECK(ppctl::comm::rank_list({1, 3, 5, 7}) == "ranks 1-7:2");  // strided, as the plan writes it
}
