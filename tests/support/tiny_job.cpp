// Test support: writing and running the tiny job (see tiny_job.hpp).
#include "support/tiny_job.hpp"

#include <catch2/catch_test_macros.hpp>
#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <chrono>
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <regex>
#include <sstream>

#include <nlohmann/json.hpp>

#include "config/load.hpp"
#include "job/local_job.hpp"
#include "observe/run_dir.hpp"
#include "support/temp_dir.hpp"

namespace ppctl::test {
namespace fs = std::filesystem;

fs::path fresh_dir(const std::string& name) { return process_temp_dir("ppctl_step_" + name + "_"); }

fs::path make_job(const Job& job, const fs::path& dir) {
  std::string corpus;
  for (int i = 0; i < 400; ++i) corpus += fmt::format("line {}: the quick brown fox jumps over the lazy dog\n", i);
  write_checked(dir / "corpus.txt", corpus);
  const auto spec = dir / "job.yaml";
  write_checked(spec, fmt::format(
      R"(model: {{layers: 4, hidden: 32, heads: 4, seq_len: 16, dropout: 0.0{}}}
pipeline: {{stages: {}, schedule: 1f1b, microbatches: {}, micro_batch_size: {}{}}}
data: {{path: corpus.txt{}}}
optimizer: {{lr: 0.001{}}}
train: {{steps: {}, seed: 17{}}}
runtime: {{comm_timeout_s: 60, threads_per_worker: 1{}}}
{})",
      job.model, job.stages, job.microbatches, job.micro_batch_size, job.pipeline, job.data, job.optimizer, job.steps, job.train,
      job.runtime, job.sections));
  return spec;
}

fs::path edit_spec(const fs::path& spec_path, const std::string& from, const std::string& to) {
  std::ifstream in(spec_path);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const auto at = text.find(from);
  REQUIRE(at != std::string::npos);
  text.replace(at, from.size(), to);
  write_checked(spec_path, text);
  return spec_path;
}

Run run_job(const fs::path& spec_path, const std::vector<std::string>& args) { return run_job(spec_path, args, {}); }

Run run_job(const fs::path& spec_path, const std::vector<std::string>& args, const fs::path& run_dir) {
  std::vector<std::pair<std::string, std::string>> env;
  if (!run_dir.empty()) {
    fs::create_directories(run_dir);
    env.emplace_back(observe::kRunDirVariable, run_dir.string());
  }
  const auto spec = config::load_job_spec(spec_path.string());
  const auto log = spec_path.parent_path() / "output.log";
  std::fflush(stdout);
  std::fflush(stderr);
  const int saved_out = ::dup(STDOUT_FILENO), saved_err = ::dup(STDERR_FILENO);
  const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  REQUIRE(fd >= 0);
  ::dup2(fd, STDOUT_FILENO);
  ::dup2(fd, STDERR_FILENO);
  ::close(fd);
  struct Restore {  // the test's own output again, also when the launch throws
    int out, err;
    ~Restore() {
      std::fflush(stdout);
      std::fflush(stderr);
      ::dup2(out, STDOUT_FILENO);
      ::dup2(err, STDERR_FILENO);
      ::close(out);
      ::close(err);
    }
  };
  Run run;
  {
    const Restore restore{saved_out, saved_err};
    const auto start = std::chrono::steady_clock::now();
    const auto world = spec.pipeline.tensor_parallel * spec.pipeline.stages *
                       std::max<int64_t>(spec.pipeline.data_parallel, 1);  // tp x dp x pp
    run.result = job::run_local_job(spec, static_cast<int>(world), PPCTL_BINARY, spec_path.string(), args, env);
    run.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }
  std::ifstream in(log);
  run.output.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  return run;
}

std::map<int64_t, LoggedStep> logged_steps(const std::string& output) {
  static const std::regex line(
      R"(step (\d+)/\d+ \| loss (\S+) \| lr (\S+) \| grad norm (\S+) \| \S+ tok/s \| step \S+ s(?: \| \S+ TFLOP/s)?(?: \| MFU \S+%)?( \| skipped)?$)");
  std::map<int64_t, LoggedStep> steps;
  std::istringstream in(output);
  for (std::string text; std::getline(in, text);) {
    std::smatch m;
    if (!std::regex_search(text, m, line)) continue;
    steps[std::stoll(m[1])] = {std::stod(m[2]), std::stod(m[3]), std::stod(m[4]), m[5].matched};
  }
  return steps;
}

std::map<int64_t, LoggedStep> metrics_steps(const fs::path& run_dir) {
  std::ifstream in(run_dir / "metrics.jsonl");
  REQUIRE(in.good());
  std::map<int64_t, LoggedStep> steps;
  for (std::string text; std::getline(in, text);) {
    const auto line = nlohmann::json::parse(text);
    if (line.at("event") != "step") continue;
    steps[line.at("step").get<int64_t>()] = {line.at("loss").get<double>(), line.at("lr").get<double>(),
                                             line.at("grad_norm").get<double>(), line.at("skipped").get<bool>()};
  }
  return steps;
}

std::vector<std::string> tied_hashes(const std::string& output) {
  static const std::regex line(R"(tied embedding on stage \d+: (fnv1a64 [0-9a-f]+, moments fnv1a64 [0-9a-f]+))");
  std::vector<std::string> hashes;
  for (auto it = std::sregex_iterator(output.begin(), output.end(), line); it != std::sregex_iterator(); ++it) {
    hashes.push_back((*it)[1]);
  }
  return hashes;
}

}  // namespace ppctl::test
