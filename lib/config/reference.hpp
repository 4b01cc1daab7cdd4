// The job spec's reference, generated from the schema (schema.cpp): one field's help for `ppctl help FIELD`
// and the whole field reference as Markdown (docs/spec-reference.md), so the docs cannot drift from the code.
#pragma once

#include <string>
#include <vector>

namespace ppctl::config {

/// One field of the job spec as the reference shows it.
struct FieldDoc {
  std::string section;       ///< `pipeline`
  std::string key;           ///< `stages`
  std::string type;          ///< how the value is written: `integer`, `number`, `true or false`, `one of ...`, ...
  std::string range;         ///< the values allowed (`1 to 1024`, `(0, 1]`, the choices); "" when the type says it
  std::string default_text;  ///< the value when not written, as YAML writes it; "" when there is none
  std::string doc;           ///< one line: what the value means

  /// `section.key`.
  std::string path() const { return section + "." + key; }
};

/// One top-level section of the spec: its name, a line on what it holds, and its fields in layout order.
struct SectionDoc {
  std::string name;
  std::string doc;
  std::vector<FieldDoc> fields;
};

/// Every section and field of the job spec, in the spec's layout order, read off the schema table that the
/// loader itself reads with (so a field added, renamed or given another range or default appears here).
std::vector<SectionDoc> spec_reference();

/// The whole reference as Markdown: a heading per section (`## model`, ...) and a table of its fields
/// (field, type, allowed values, default, meaning). `ppctl help --markdown` prints it; docs/spec-reference.md is
/// this text, checked by the test docs.reference.
std::string spec_reference_markdown();

/// `ppctl help TOPIC` in a terminal. TOPIC empty: every section with its fields and one line each; a section
/// name (`pipeline`): its fields; a field (`pipeline.schedule`, or a bare key that one section alone has, such
/// as `microbatches`): its doc, type, allowed values and default. Throws ppctl::ConfigError naming TOPIC and
/// the fix (a did-you-mean, where another tool's key goes, or `ppctl help` to list them) when TOPIC is none of
/// these.
std::string spec_help(const std::string& topic);

}  // namespace ppctl::config
