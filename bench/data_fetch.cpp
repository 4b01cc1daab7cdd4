// Benchmark: the cost of fetching one step's samples from a job's data (data::Dataset), and the
// process's resident memory afterwards. Run through scripts/bench/data_fetch.py.
// Usage: data_fetch SPEC [STEPS]  ->  one line: "fetch_us_per_step X rss_kib Y rss_anon_kib Z rss_file_kib W"
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include "config/load.hpp"
#include "data/dataset.hpp"

namespace {

/// A field of /proc/self/status in KiB (VmRSS, RssAnon, RssFile), or -1.
long status_kib(const std::string& field) {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(field + ":", 0) == 0) return std::stol(line.substr(field.size() + 1));
  }
  return -1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::cerr << "usage: data_fetch SPEC [STEPS]\n";
    return 2;
  }
  const auto spec = ppctl::config::load_job_spec(argv[1]);
  const int64_t steps = argc > 2 ? std::stoll(argv[2]) : 200;
  ppctl::data::Dataset dataset(spec);
  const int64_t batch = spec.pipeline.microbatches * spec.pipeline.micro_batch_size;
  const int64_t seq = spec.model.seq_len;
  std::vector<int64_t> tokens(static_cast<size_t>(seq)), targets(static_cast<size_t>(seq));
  int64_t checksum = 0;
  const auto start = std::chrono::steady_clock::now();
  for (int64_t i = 0; i < steps * batch; ++i) {
    dataset.sample(i, tokens.data(), targets.data());
    checksum += tokens[0];
  }
  const double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count();
  std::printf("fetch_us_per_step %.2f rss_kib %ld rss_anon_kib %ld rss_file_kib %ld checksum %lld\n",
              us / static_cast<double>(steps), status_kib("VmRSS"), status_kib("RssAnon"), status_kib("RssFile"),
              static_cast<long long>(checksum));
  return 0;
}
