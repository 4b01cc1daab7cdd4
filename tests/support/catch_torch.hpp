// Catch2 for tests that use LibTorch. c10's logging header defines a glog-style CHECK macro; included
// after Catch2 it silently replaces Catch2's CHECK (passes go uncounted, a failure aborts the run).
// Include this instead of <catch2/catch_test_macros.hpp>: LibTorch first, c10's CHECK dropped, then
// Catch2, whose CHECK then stays (c10's header has an include guard and is not read again).
#pragma once

#include <torch/torch.h>

#undef CHECK
#include <catch2/catch_test_macros.hpp>
