// The schedule IR: action kinds, the text form (`1F3`, `0SEND_B2`, `1REDUCE_GRAD`), neighbour/transfer
// helpers, tags.
#include "schedule/action.hpp"

#include <fmt/format.h>

#include <array>
#include <charconv>
#include <utility>

#include "core/error.hpp"

namespace ppctl::schedule {
namespace {

/// Every kind with its text, in enum order. The one table both directions of the text form read.
constexpr std::array<std::pair<ActionKind, std::string_view>, 9> kKindNames{{
    {ActionKind::F, "F"},
    {ActionKind::B, "B"},
    {ActionKind::I, "I"},
    {ActionKind::W, "W"},
    {ActionKind::SEND_F, "SEND_F"},
    {ActionKind::RECV_F, "RECV_F"},
    {ActionKind::SEND_B, "SEND_B"},
    {ActionKind::RECV_B, "RECV_B"},
    {ActionKind::REDUCE_GRAD, "REDUCE_GRAD"},
}};

bool is_digit(char c) { return c >= '0' && c <= '9'; }

[[noreturn]] void throw_parse_error(std::string_view text, std::string_view problem) {
  std::string kinds;
  for (const auto& [kind, name] : kKindNames) {
    if (is_reduce(kind)) continue;
    if (!kinds.empty()) kinds += ", ";
    kinds += name;
  }
  throw ScheduleError(
      fmt::format("invalid action \"{}\": {}; expected <stage><kind><microbatch> (non-negative "
                  "integers without sign or leading zeros, kind one of {}) or <stage>REDUCE_GRAD, "
                  "e.g. 1F3, 0SEND_B2 or 1REDUCE_GRAD",
                  text, problem, kinds));
}

/// Reads a non-negative decimal integer at text[pos...]; advances pos. `what` names it in errors.
int64_t parse_index(std::string_view text, size_t& pos, std::string_view what) {
  const size_t start = pos;
  while (pos < text.size() && is_digit(text[pos])) ++pos;
  if (pos == start) throw_parse_error(text, fmt::format("missing {} number", what));
  if (pos - start > 1 && text[start] == '0')
    throw_parse_error(text, fmt::format("{} number has a leading zero", what));
  int64_t value = 0;
  const auto [end, ec] = std::from_chars(text.data() + start, text.data() + pos, value);
  if (ec != std::errc() || end != text.data() + pos)
    throw_parse_error(text, fmt::format("{} number is out of range", what));
  return value;
}

}  // namespace

bool is_compute(ActionKind kind) {
  return kind == ActionKind::F || kind == ActionKind::B || kind == ActionKind::I ||
         kind == ActionKind::W;
}

bool is_send(ActionKind kind) { return kind == ActionKind::SEND_F || kind == ActionKind::SEND_B; }

bool is_recv(ActionKind kind) { return kind == ActionKind::RECV_F || kind == ActionKind::RECV_B; }

bool is_reduce(ActionKind kind) { return kind == ActionKind::REDUCE_GRAD; }

std::string to_string(ActionKind kind) {
  for (const auto& [k, name] : kKindNames)
    if (k == kind) return std::string(name);
  return fmt::format("<bad ActionKind {}>", static_cast<int>(kind));
}

std::string to_string(const Action& action) {
  if (is_reduce(action.kind)) return fmt::format("{}{}", action.stage, to_string(action.kind));
  return fmt::format("{}{}{}", action.stage, to_string(action.kind), action.microbatch);
}

Action parse_action(std::string_view text) {
  size_t pos = 0;
  Action action;
  action.stage = parse_index(text, pos, "stage");
  const size_t kind_start = pos;
  while (pos < text.size() && !is_digit(text[pos])) ++pos;
  const std::string_view kind_text = text.substr(kind_start, pos - kind_start);
  bool known = false;
  for (const auto& [kind, name] : kKindNames) {
    if (name == kind_text) {
      action.kind = kind;
      known = true;
    }
  }
  if (!known)
    throw_parse_error(text, kind_text.empty() ? std::string("missing kind")
                                              : fmt::format("unknown kind \"{}\"", kind_text));
  if (is_reduce(action.kind)) {
    if (pos != text.size())
      throw_parse_error(text, fmt::format("REDUCE_GRAD takes no microbatch, but \"{}\" follows it",
                                          text.substr(pos)));
    return action;
  }
  action.microbatch = parse_index(text, pos, "microbatch");
  if (pos != text.size())
    throw_parse_error(text,
                      fmt::format("unexpected \"{}\" after the microbatch", text.substr(pos)));
  return action;
}

RankProgram parse_rank(std::string_view text) {
  RankProgram program;
  size_t pos = 0;
  while (pos < text.size()) {
    while (pos < text.size() && (text[pos] == ' ' || text[pos] == '\t' || text[pos] == '\n')) ++pos;
    const size_t start = pos;
    while (pos < text.size() && text[pos] != ' ' && text[pos] != '\t' && text[pos] != '\n') ++pos;
    if (pos > start) program.push_back(parse_action(text.substr(start, pos - start)));
  }
  return program;
}

Action matching_transfer(const Action& comm) {
  Action other = comm;
  switch (comm.kind) {
    case ActionKind::SEND_F:
      other = {ActionKind::RECV_F, comm.stage + 1, comm.microbatch};
      break;
    case ActionKind::RECV_F:
      other = {ActionKind::SEND_F, comm.stage - 1, comm.microbatch};
      break;
    case ActionKind::SEND_B:
      other = {ActionKind::RECV_B, comm.stage - 1, comm.microbatch};
      break;
    case ActionKind::RECV_B:
      other = {ActionKind::SEND_B, comm.stage + 1, comm.microbatch};
      break;
    default:  // F, B, I, W, REDUCE_GRAD
      throw ScheduleError(fmt::format(
          "{} is not a transfer; only SEND_F, RECV_F, SEND_B and RECV_B have a matching transfer",
          to_string(comm)));
  }
  if (other.stage < 0)
    throw ScheduleError(
        fmt::format("{} has no peer: stage 0 has no previous stage", to_string(comm)));
  return other;
}

namespace {
/// Throws ScheduleError unless `compute` is a compute action (F, B, I or W).
void require_compute(const Action& compute) {
  if (!is_compute(compute.kind))
    throw ScheduleError(fmt::format("{} is a {} action; expected a compute action (F, B, I or W)",
                                    to_string(compute),
                                    is_reduce(compute.kind) ? "gradient reduction" : "transfer"));
}

/// Which way the tensor a compute action produces flows: +1 for F (activation to stage s+1), -1 for
/// B and I (input gradient to stage s-1), 0 for W (weight gradients stay on the stage).
int flow(ActionKind kind) {
  if (kind == ActionKind::F) return +1;
  return kind == ActionKind::W ? 0 : -1;
}

/// Rank of `stage` in `program`, or throws ScheduleError naming the action it was looked up for.
int64_t rank_of(const Program& program, int64_t stage, const Action& for_action) {
  if (stage < 0 || stage >= static_cast<int64_t>(program.stage_to_rank.size()))
    throw ScheduleError(fmt::format("{}: stage {} is outside [0, {}) (the size of stage_to_rank)",
                                    to_string(for_action), stage, program.stage_to_rank.size()));
  return program.stage_to_rank[static_cast<size_t>(stage)];
}

/// The transfer for `compute` with the neighbour it sends to (`toward` = +1) or receives from
/// (`toward` = -1), of kind `forward_kind` for F and `backward_kind` for B and I, when that
/// neighbour exists and runs on another rank. W moves nothing.
std::optional<Action> cross_rank_transfer(const Action& compute, const Program& program, int toward,
                                          ActionKind forward_kind, ActionKind backward_kind) {
  require_compute(compute);
  if (flow(compute.kind) == 0) return std::nullopt;
  const int64_t neighbour = compute.stage + toward * flow(compute.kind);
  if (neighbour < 0 || neighbour >= program.num_stages) return std::nullopt;
  if (rank_of(program, neighbour, compute) == rank_of(program, compute.stage, compute))
    return std::nullopt;
  return Action{compute.kind == ActionKind::F ? forward_kind : backward_kind, compute.stage,
                compute.microbatch};
}
}  // namespace

std::optional<Action> upstream_compute(const Action& compute, int64_t num_stages) {
  require_compute(compute);
  if (flow(compute.kind) == 0) return std::nullopt;
  const int64_t upstream = compute.stage - flow(compute.kind);
  if (upstream < 0 || upstream >= num_stages) return std::nullopt;
  return Action{compute.kind, upstream, compute.microbatch};
}

std::optional<Action> input_transfer(const Action& compute, const Program& program) {
  return cross_rank_transfer(compute, program, -1, ActionKind::RECV_F, ActionKind::RECV_B);
}

std::optional<Action> output_transfer(const Action& compute, const Program& program) {
  return cross_rank_transfer(compute, program, +1, ActionKind::SEND_F, ActionKind::SEND_B);
}

std::string format_rank(const RankProgram& program, bool compute_only) {
  bool one_stage = true;
  for (const Action& action : program)
    one_stage = one_stage && action.stage == program.front().stage;
  std::string out;
  for (const Action& action : program) {
    if (compute_only && !is_compute(action.kind)) continue;
    if (!out.empty()) out += ' ';
    out += (compute_only && one_stage)
               ? fmt::format("{}{}", to_string(action.kind), action.microbatch)
               : to_string(action);
  }
  return out;
}

int64_t message_tag(const Action& action, int64_t num_microbatches) {
  if (!is_send(action.kind) && !is_recv(action.kind))
    throw ScheduleError(
        fmt::format("message_tag({}): only SEND_F, RECV_F, SEND_B and RECV_B carry a message tag",
                    to_string(action)));
  if (action.microbatch < 0 || action.microbatch >= num_microbatches)
    throw ScheduleError(fmt::format("message_tag({}): microbatch {} is outside [0, {})",
                                    to_string(action), action.microbatch, num_microbatches));
  // The receiving end names the transfer, so a SEND and its RECV agree.
  const Action receiver = is_recv(action.kind) ? action : matching_transfer(action);
  if (receiver.stage < 0)
    throw ScheduleError(fmt::format("message_tag({}): stage must be >= 0", to_string(action)));
  const int64_t direction = receiver.kind == ActionKind::RECV_F ? 0 : 1;
  return (receiver.stage * num_microbatches + action.microbatch) * 2 + direction;
}

}  // namespace ppctl::schedule
