// `ppctl verify`: pipelined step vs unpipelined step, compared tensor by tensor.
#include "job/verify.hpp"

#include <ATen/Parallel.h>
#include <fmt/format.h>
#include <stdlib.h>

#include <algorithm>
#include <filesystem>

#include "core/error.hpp"
#include "job/local_job.hpp"
#include "job/worker_handover.hpp"
#include "train/oracle.hpp"

namespace ppctl::job {
namespace {

/// A temporary folder removed when the object goes out of scope.
struct TempDir {
  std::string path;
  TempDir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "ppctl_verify_XXXXXX").string();
    if (::mkdtemp(pattern.data()) == nullptr) throw Error("cannot create a temporary folder");
    path = pattern;
  }
  ~TempDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path, ignored);
  }
};

}  // namespace

VerifyReport verify_job(const PreparedJob& job, const std::string& executable, const std::string& spec_path,
                        double tolerance) {
  const config::JobSpec& spec = job.spec;
  const int world_size = static_cast<int>(job.layout.world_size);
  TempDir handover;
  TempDir dumps;
  const auto result = run_local_job(spec, world_size, executable, spec_path,
                                    {"--steps", "1", "--dump-gradients", dumps.path},
                                    hand_over_to_workers(job, handover.path));
  if (result.exit_code != 0) {
    return {fmt::format("the pipelined step failed: {}\n", result.message), result.exit_code};
  }
  const auto pipelined = train::load_gradient_dumps(dumps.path, world_size);
  at::set_num_threads(static_cast<int>(spec.runtime.threads_per_worker));
  const auto reference = train::reference_gradients(spec);
  auto rows = train::compare_gradients(pipelined, reference);

  VerifyReport report;
  const std::string grid = job.layout.grid().describe();  // "tp 2 x pp 2 = 4 ranks; rank = ..."
  report.text = fmt::format("{}: schedule {}, {}, one step, pipelined vs unpipelined\n\n", spec.source,
                            config::to_string(spec.pipeline.schedule), grid.substr(0, grid.find(';')));
  report.text += fmt::format("{:<28} {:>14} {:>14}\n", "tensor", "max rel diff", "max |ref|");
  double worst = 0.0;
  std::string worst_name;
  for (const auto& row : rows) {
    const std::string name = row.name == train::kLossKey       ? "(loss)"
                             : row.name == train::kGradNormKey ? "(grad norm)"
                                                        : row.name;
    report.text += fmt::format("{:<28} {:>14.3e} {:>14.3e}\n", name, row.max_relative_difference,
                               row.reference_max_abs);
    if (row.max_relative_difference >= worst) {
      worst = row.max_relative_difference;
      worst_name = name;
    }
  }
  const bool pass = worst <= tolerance;
  report.text += fmt::format("\n{}: largest difference {:.3e} in {} {} tolerance {:.1e} over {} tensors\n",
                             pass ? "PASS" : "FAIL", worst, worst_name, pass ? "<=" : ">", tolerance,
                             rows.size());
  report.exit_code = pass ? 0 : kExitVerifyMismatch;
  return report;
}

}  // namespace ppctl::job
