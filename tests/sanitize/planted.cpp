// Planted memory and thread errors for scripts/sanitize.sh --self-test: the sanitizer builds must report each
// (a build that stays silent here would pass anything). Does nothing unless told which fault to run.
//   planted use-after-free   reads a freed heap block (AddressSanitizer: heap-use-after-free)
//   planted data-race        two threads increment one plain int (ThreadSanitizer: data race)
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>

namespace {

int use_after_free() {
  // Through a volatile pointer, so that the optimizer cannot drop the allocation and the read with it.
  int* volatile block = static_cast<int*>(std::malloc(4 * sizeof(int)));
  block[2] = 3;
  std::free(block);
  return block[2] == 3 ? 0 : 1;  // the planted read of freed memory
}

int data_race() {
  int counter = 0;  // no atomic, no lock: the planted race
  auto add = [&counter] {
    for (int i = 0; i < 100000; ++i) counter = counter + 1;
  };
  std::thread a(add), b(add);
  a.join();
  b.join();
  std::printf("%d\n", counter);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 2 && std::strcmp(argv[1], "use-after-free") == 0) return use_after_free();
  if (argc == 2 && std::strcmp(argv[1], "data-race") == 0) return data_race();
  std::fprintf(stderr, "usage: planted use-after-free|data-race (scripts/sanitize.sh --self-test)\n");
  return 2;
}
