// Readable text of exceptions that come out of LibTorch (c10::Error without its C++ backtrace).
#pragma once

#include <exception>
#include <string>

namespace ppctl::comm {

/// e.what(), except for c10::Error, whose what() carries dozens of backtrace frames: then only the
/// message (what_without_backtrace()).
std::string error_text(const std::exception& e);

}  // namespace ppctl::comm
