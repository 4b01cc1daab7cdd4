// Custom schedules as CSV: one row per rank, one compute action per cell (`0F0,0F1,0B0,...`).
#pragma once

#include <cstdint>
#include <string>

#include "schedule/action.hpp"

namespace ppctl::schedule {

/// Parses a CSV schedule: row r (blank lines and lines starting with '#' skipped) lists rank r's
/// compute actions (F, B, I, W) in order, one per cell, in text form (`1F3`, `0I2`, `0W2`); empty
/// cells and surrounding spaces are ignored. The result is compute-only; stage_to_rank is inferred
/// (the row in which a stage's actions appear), num_stages and num_microbatches from the largest
/// indices. Throws ppctl::ScheduleError naming `source`, the line, the row (rank + 1) and the
/// column (cell, from 1) on malformed cells, transfers or REDUCE_GRAD, a stage appearing on two ranks,
/// or a row with no action; and naming `source` for an empty schedule or stages / microbatches with
/// no action. Whether the actions form a valid schedule (each F once, dependencies, no deadlock) is
/// validate()'s job, after add_communication.
Program parse_csv(const std::string& text, const std::string& source);

/// parse_csv on a file's contents; throws ppctl::ScheduleError naming the path if it cannot be read.
Program read_csv(const std::string& path);

/// The compute actions of every rank as CSV (one row per rank); parse_csv(to_csv(p)) gives back p's
/// compute actions and placement.
std::string to_csv(const Program& program);

/// A 64-bit FNV-1a hash of the program's full text (geometry, placement and every action of every
/// rank): equal programs hash equal on every machine.
uint64_t program_hash(const Program& program);

}  // namespace ppctl::schedule
