// Test driver of lib/jinja for tests/jinja/test_jinja2_parity.py: renders many (template, context) cases in
// one process. Usage: jinja_render IN.json OUT.json, where IN is {"templates": {NAME: SOURCE, ...},
// "cases": [{"template": NAME, "context": {...}, "now": UNIX_SECONDS (optional)}, ...]} and OUT gets one
// entry per case: {"text": ..., "generation": [[BEGIN, END], ...]} (byte offsets) or {"error": MESSAGE}.
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>

#include "jinja/template.hpp"

int main(int argc, char** argv) {
  using ppctl::jinja::Json;
  if (argc != 3) {
    std::cerr << "usage: jinja_render IN.json OUT.json\n";
    return 2;
  }
  std::ifstream in(argv[1]);
  const Json input = Json::parse(in);
  std::map<std::string, std::unique_ptr<ppctl::jinja::Template>> templates;
  std::map<std::string, std::string> parse_errors;
  for (const auto& [name, source] : input.at("templates").items()) {
    try {
      templates[name] = std::make_unique<ppctl::jinja::Template>(source.get<std::string>(), name);
    } catch (const ppctl::jinja::TemplateError& e) {
      parse_errors[name] = e.what();
    }
  }
  Json out = Json::array();
  for (const auto& c : input.at("cases")) {
    const std::string name = c.at("template").get<std::string>();
    Json result = Json::object();
    if (parse_errors.count(name)) {
      result["error"] = parse_errors[name];
      out.push_back(result);
      continue;
    }
    ppctl::jinja::RenderOptions options;
    if (c.contains("now")) options.now = c.at("now").get<std::time_t>();
    try {
      const auto rendered = templates.at(name)->render(c.at("context"), options);
      result["text"] = rendered.text;
      result["generation"] = rendered.generation;
    } catch (const ppctl::jinja::TemplateError& e) {
      result["error"] = e.what();
      result["message"] = e.message();
    }
    out.push_back(result);
  }
  std::ofstream(argv[2]) << out.dump();
  return 0;
}
