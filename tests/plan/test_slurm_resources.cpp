// Tests for plan/slurm_resources: the sbatch and srun lines `ppctl plan` prints ask for the job's tasks and CPUs,
// and pasted into a shell they pass the spec path on as one word, whatever it holds.
#include <catch2/catch_test_macros.hpp>
#include <catch2/generators/catch_generators.hpp>

#include <algorithm>
#include <sstream>
#include <string>
#include <vector>

#include "config/job_spec.hpp"
#include "plan/slurm_resources.hpp"
#include "support/shell_words.hpp"

using ppctl::plan::format_slurm_resources;

namespace {

/// The command of each line (what comes before the three-space note), as bash splits it.
std::vector<std::vector<std::string>> commands(const std::string& text) {
  std::vector<std::vector<std::string>> out;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    const auto note = line.find("   (");
    out.push_back(ppctl::test::shell_words(line.substr(0, note)));
  }
  return out;
}

}  // namespace

TEST_CASE("the Slurm lines pass any spec path on as one word", "[slurm]") {
  const bool cuda = GENERATE(false, true);
  ppctl::config::JobSpec spec;
  spec.runtime.device = cuda ? ppctl::config::Device::Cuda : ppctl::config::Device::Cpu;
  spec.runtime.threads_per_worker = 3;
  for (const std::string path : {"configs/example.yaml", "my jobs/job 1.yaml", "it's $(here).yaml"}) {
    INFO(path << (cuda ? " on cuda" : " on cpu"));
    spec.source = path;
    const auto lines = commands(format_slurm_resources(spec, 16));
    REQUIRE(lines.size() == 2);
    CHECK(lines[0].front() == "sbatch");
    CHECK(lines[0].back() == path);
    CHECK(lines[0][lines[0].size() - 2] == (cuda ? "scripts/slurm/gpu.sbatch" : "scripts/slurm/cpu.sbatch"));
    CHECK(lines[1].front() == "srun");
    CHECK(lines[1].back() == path);
    CHECK(lines[1][lines[1].size() - 2] == "train");
    CHECK(std::find(lines[1].begin(), lines[1].end(), "--cpus-per-task=3") != lines[1].end());
  }
}

TEST_CASE("on GPUs the tasks per node hold whole tensor-parallel groups; on CPUs the note asks for them", "[slurm]") {
  ppctl::config::JobSpec spec;
  spec.source = "job.yaml";
  spec.runtime.device = ppctl::config::Device::Cuda;
  spec.pipeline.tensor_parallel = 4;
  // 12 ranks: 6 per node would split a group of 4 over two nodes; 4 per node (3 nodes) keeps each whole.
  CHECK(format_slurm_resources(spec, 12).find("--nodes=3 --ntasks-per-node=4 ") != std::string::npos);
  spec.pipeline.tensor_parallel = 1;
  CHECK(format_slurm_resources(spec, 12).find("--nodes=2 --ntasks-per-node=6 ") != std::string::npos);
  spec.pipeline.tensor_parallel = 2;
  spec.runtime.device = ppctl::config::Device::Cpu;
  CHECK(format_slurm_resources(spec, 8).find("--ntasks-per-node=8/N, a multiple of tensor_parallel 2)") !=
        std::string::npos);
}
