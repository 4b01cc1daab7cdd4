// Template and TemplateError (see template.hpp): parse once, render with a fresh Renderer each time.
#include "jinja/template.hpp"

#include "jinja/ast.hpp"
#include "jinja/renderer.hpp"

namespace ppctl::jinja {

TemplateError::TemplateError(const std::string& origin, int line, const std::string& message, Failure failure)
    : DataError(origin + ":" + std::to_string(line) + ": " + message),
      origin_(origin),
      line_(line),
      message_(message),
      failure_(failure) {}

Template::Template(std::string_view source, std::string origin, const Limits& limits)
    : origin_(std::move(origin)),
      program_(std::make_shared<const Program>(parse(source, origin_, limits.max_depth))) {}

Template::~Template() = default;
Template::Template(Template&&) noexcept = default;
Template& Template::operator=(Template&&) noexcept = default;

Rendered Template::render(const Json& context, const RenderOptions& options) const {
  Renderer renderer(origin_, options);
  return renderer.run(*program_, context);
}

}  // namespace ppctl::jinja
