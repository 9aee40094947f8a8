#include "gputrain/report/html_report.h"

#include <fmt/chrono.h>
#include <fmt/format.h>

#include <ctime>

#include "gputrain/common/files.h"
#include "gputrain/device/versions.h"
#include "html_charts.h"
#include "html_run.h"
#include "html_sections.h"
#include "svg_chart.h"

namespace gputrain::report {

namespace fs = std::filesystem;

namespace detail {
namespace {

constexpr const char* kStyle = R"(
:root { color-scheme: light; }
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: #1d232a; background: #f6f7f9;
       margin: 0; }
main { max-width: 1360px; margin: 0 auto; padding: 24px 28px 40px; }
h1 { font-size: 24px; margin: 0 0 4px; }
h2 { font-size: 18px; margin: 32px 0 10px; border-bottom: 1px solid #d8dde3; padding-bottom: 4px; }
h3 { font-size: 15px; margin: 18px 0 8px; }
.sub { color: #56606b; margin: 0 0 14px; }
.badge { display: inline-block; padding: 1px 9px; border-radius: 10px; font-size: 13px; font-weight: 600;
         vertical-align: middle; margin-left: 8px; }
.badge.ok { background: #dff3e4; color: #14692d; } .badge.warn { background: #fff1d6; color: #8a5300; }
.badge.bad { background: #fde0e0; color: #a01616; } .badge.unknown { background: #e8ebef; color: #444; }
.notes { background: #fff8e6; border: 1px solid #f0d9a0; border-radius: 6px; padding: 8px 14px 8px 30px; }
.notes li { margin: 3px 0; }
.cards { display: flex; flex-wrap: wrap; gap: 10px; margin: 14px 0; }
.card { background: #fff; border: 1px solid #dde2e8; border-radius: 6px; padding: 8px 14px; min-width: 130px; }
.card .label { color: #56606b; font-size: 12px; text-transform: uppercase; letter-spacing: .03em; }
.card .value { font-size: 18px; font-weight: 600; }
.charts { display: grid; grid-template-columns: repeat(auto-fill, minmax(520px, 1fr)); gap: 14px; }
figure { margin: 0; background: #fff; border: 1px solid #dde2e8; border-radius: 6px; padding: 10px 12px; }
figcaption { font-weight: 600; margin-bottom: 2px; }
figure p { color: #56606b; font-size: 12px; margin: 4px 0 0; }
svg.chart { width: 100%; height: auto; display: block; font: 11px system-ui, sans-serif; }
svg.chart .plot { fill: #fcfcfd; stroke: #c9d0d8; }
svg.chart .grid { stroke: #e6e9ed; }
svg.chart .tick { fill: #56606b; } svg.chart .axis { fill: #1d232a; font-size: 12px; }
svg.chart .legend { fill: #1d232a; }
table { border-collapse: collapse; background: #fff; margin: 6px 0; font-size: 13px; }
th, td { border: 1px solid #dde2e8; padding: 4px 9px; text-align: left; vertical-align: top; }
th { background: #eef1f4; font-weight: 600; }
table.numbers td { text-align: right; font-variant-numeric: tabular-nums; }
table.keys td:first-child { color: #56606b; white-space: nowrap; }
table.keys thead { display: none; }
pre { background: #fff; border: 1px solid #dde2e8; border-radius: 6px; padding: 10px 14px; overflow-x: auto;
      font-size: 12.5px; }
footer { color: #7a838d; font-size: 12px; margin-top: 36px; }
)";

std::string render(const Run& run) {
  const Status status = run_status(run);
  std::vector<std::string> notes = partial_run_notes(run);
  notes.insert(notes.end(), run.metrics.notes.begin(), run.metrics.notes.end());
  notes.insert(notes.end(), run.notes.begin(), run.notes.end());

  std::string html = "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n";
  html += "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n";
  html += fmt::format("<title>{} · gputrain report</title>\n<style>{}</style>\n</head>\n<body>\n<main>\n",
                      html_escape(run.name), kStyle);
  html += fmt::format(R"(<h1>{}<span class="badge {}">{}</span></h1>)", html_escape(run.name), status.css,
                      html_escape(status.label));
  if (run.info) {
    html += fmt::format(R"(<p class="sub">Started {}{} · {} · strategy {} · {}</p>)", html_escape(run.info->started),
                        run.info->ended.empty() ? "" : ", ended " + html_escape(run.info->ended),
                        html_escape(run.info->device), html_escape(run.info->strategy),
                        run.info->amp == config::AmpMode::kOff ? "fp32" : config::word(run.info->amp));
  }
  if (!notes.empty()) {
    html += R"(<ul class="notes">)";
    for (const auto& note : notes) html += "<li>" + html_escape(note) + "</li>";
    html += "</ul>";
  }
  html += summary_section(run);

  const std::vector<Figured> charts = make_charts(run);
  if (!charts.empty()) {
    html += R"(<h2>Curves</h2><div class="charts">)";
    for (const auto& f : charts) {
      html += fmt::format("<figure><figcaption>{}</figcaption>{}<p>{}</p></figure>", html_escape(f.caption),
                          detail::render_svg(f.chart), html_escape(f.note));
    }
    html += "</div>";
  }
  html += epochs_section(run);
  if (run.info) html += splits_section(*run.info) + run_section(*run.info);
  if (run.config_text) {
    html +=
        "<h2>Configuration</h2><p>The resolved config (config.yaml); <code>gputrain train --config</code> "
        "accepts it as is.</p><pre>" +
        html_escape(*run.config_text) + "</pre>";
  }
  if (const auto profile = train::read_profile_summary(run.dir / "profile.json")) html += profile_section(*profile);
  if (run.device) html += device_section(*run.device);
  html += fmt::format("<footer>Written by gputrain {} on {} from {}.</footer>\n</main>\n</body>\n</html>\n",
                      html_escape(device::version()),
                      fmt::format("{:%Y-%m-%d %H:%M:%S}", fmt::localtime(std::time(nullptr))),
                      html_escape(fs::absolute(run.dir).lexically_normal().string()));
  return html;
}

}  // namespace
}  // namespace detail

void write_html_report(const fs::path& run_dir, const fs::path& out) {
  write_atomically(out, detail::render(detail::load_run(run_dir)));
}

}  // namespace gputrain::report
