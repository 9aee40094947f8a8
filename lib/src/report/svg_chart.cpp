#include "svg_chart.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

namespace gputrain::report::detail {

namespace {

constexpr double kWidth = 640;
constexpr double kHeight = 320;
constexpr double kLeft = 72;
constexpr double kRight = 18;
constexpr double kBottom = 46;
constexpr double kLegendRow = 18;
constexpr std::size_t kMaxPoints = 1500;  // denser lines only add bytes at this size

struct Axis {
  double lo = 0;
  double hi = 1;
  double step = 0.2;
};

// Round ticks (1, 2 or 5 times a power of ten), about five of them, with the
// range widened to the outer ticks.
Axis nice_axis(double lo, double hi, bool integers) {
  if (!(hi > lo)) {
    const double pad = lo == 0 ? 1.0 : std::abs(lo) * 0.1;
    lo -= pad;
    hi += pad;
  }
  const double raw = (hi - lo) / 5.0;
  const double magnitude = std::pow(10.0, std::floor(std::log10(raw)));
  const double n = raw / magnitude;
  double step = (n < 1.5 ? 1.0 : n < 3.0 ? 2.0 : n < 7.0 ? 5.0 : 10.0) * magnitude;
  if (integers) step = std::max(step, 1.0);
  return {std::floor(lo / step + 1e-9) * step, std::ceil(hi / step - 1e-9) * step, step};
}

std::string tick_label(double value, double step) {
  if (std::abs(value) < step * 1e-6) value = 0;  // no "-0" or "1e-17"
  const double magnitude = std::max(std::abs(value), step);
  if (magnitude >= 1e6 || magnitude < 1e-4) return fmt::format("{:.3g}", value);
  const int decimals = std::clamp(static_cast<int>(-std::floor(std::log10(step) + 1e-9)), 0, 6);
  return fmt::format("{:.{}f}", value, decimals);
}

std::vector<std::pair<double, double>> finite_points(const Series& s) {
  std::vector<std::pair<double, double>> out;
  for (const auto& p : s.points) {
    if (std::isfinite(p.first) && std::isfinite(p.second)) out.push_back(p);
  }
  if (out.size() > kMaxPoints) {  // keep every k-th point and the last
    const std::size_t stride = (out.size() + kMaxPoints - 1) / kMaxPoints;
    std::vector<std::pair<double, double>> thinned;
    for (std::size_t i = 0; i < out.size(); i += stride) thinned.push_back(out[i]);
    if (thinned.back() != out.back()) thinned.push_back(out.back());
    out.swap(thinned);
  }
  return out;
}

}  // namespace

std::string html_escape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

bool has_data(const Chart& chart) {
  return std::any_of(chart.series.begin(), chart.series.end(),
                     [](const Series& s) { return !finite_points(s).empty(); });
}

std::string render_svg(const Chart& chart) {
  std::vector<std::vector<std::pair<double, double>>> points;
  double x_lo = std::numeric_limits<double>::infinity(), x_hi = -x_lo, y_lo = x_lo, y_hi = -x_lo;
  for (const auto& s : chart.series) {
    points.push_back(finite_points(s));
    for (const auto& [x, y] : points.back()) {
      x_lo = std::min(x_lo, x);
      x_hi = std::max(x_hi, x);
      y_lo = std::min(y_lo, y);
      y_hi = std::max(y_hi, y);
    }
  }
  if (!std::isfinite(x_lo)) x_lo = x_hi = y_lo = y_hi = 0;

  // The legend wraps into rows across the top; the plot starts below it.
  std::string legend;
  double lx = kLeft;
  double row = 0;
  for (const auto& s : chart.series) {
    const double width = 34 + 7.0 * static_cast<double>(s.name.size());
    if (lx + width > kWidth - kRight && lx > kLeft) {
      lx = kLeft;
      ++row;
    }
    const double ly = 14 + row * kLegendRow;
    legend += fmt::format(R"(<line x1="{:.1f}" y1="{:.1f}" x2="{:.1f}" y2="{:.1f}" stroke="{}" stroke-width="3"{}/>)"
                          R"(<text x="{:.1f}" y="{:.1f}" class="legend">{}</text>)",
                          lx, ly - 4, lx + 22, ly - 4, html_escape(s.color),
                          s.dashed ? R"( stroke-dasharray="5 3")" : "", lx + 28, ly, html_escape(s.name));
    lx += width;
  }
  const double top = 26 + row * kLegendRow;
  const double plot_w = kWidth - kLeft - kRight;
  const double plot_h = kHeight - top - kBottom;
  const Axis xa = nice_axis(x_lo, x_hi, chart.integer_x);
  const Axis ya = nice_axis(y_lo, y_hi, false);
  auto px = [&](double x) { return kLeft + (x - xa.lo) / (xa.hi - xa.lo) * plot_w; };
  auto py = [&](double y) { return top + plot_h - (y - ya.lo) / (ya.hi - ya.lo) * plot_h; };

  std::string svg = fmt::format(
      R"(<svg class="chart" viewBox="0 0 {} {}" role="img" aria-label="{}" xmlns="http://www.w3.org/2000/svg">)",
      kWidth, kHeight, html_escape(chart.title));
  svg +=
      fmt::format(R"(<rect class="plot" x="{}" y="{:.1f}" width="{}" height="{:.1f}"/>)", kLeft, top, plot_w, plot_h);
  for (double v = ya.lo; v <= ya.hi + ya.step * 1e-6; v += ya.step) {
    svg += fmt::format(R"(<line class="grid" x1="{}" y1="{:.1f}" x2="{}" y2="{:.1f}"/>)", kLeft, py(v), kWidth - kRight,
                       py(v));
    svg += fmt::format(R"(<text class="tick" x="{}" y="{:.1f}" text-anchor="end">{}</text>)", kLeft - 6, py(v) + 4,
                       tick_label(v, ya.step));
  }
  for (double v = xa.lo; v <= xa.hi + xa.step * 1e-6; v += xa.step) {
    svg += fmt::format(R"(<line class="grid" x1="{:.1f}" y1="{:.1f}" x2="{:.1f}" y2="{:.1f}"/>)", px(v), top, px(v),
                       top + plot_h);
    svg += fmt::format(R"(<text class="tick" x="{:.1f}" y="{:.1f}" text-anchor="middle">{}</text>)", px(v),
                       top + plot_h + 16, tick_label(v, xa.step));
  }
  svg += fmt::format(R"(<text class="axis" x="{:.1f}" y="{}" text-anchor="middle">{}</text>)", kLeft + plot_w / 2,
                     kHeight - 8, html_escape(chart.x_label));
  svg += fmt::format(
      R"svg(<text class="axis" transform="translate(16 {:.1f}) rotate(-90)" text-anchor="middle">{}</text>)svg",
      top + plot_h / 2, html_escape(chart.y_label));
  svg += legend;

  for (std::size_t i = 0; i < chart.series.size(); ++i) {
    const Series& s = chart.series[i];
    const auto& pts = points[i];
    if (pts.empty()) continue;
    const std::string color = html_escape(s.color);
    if (pts.size() > 1) {
      std::string coords;
      for (const auto& [x, y] : pts) coords += fmt::format("{:.1f},{:.1f} ", px(x), py(y));
      coords.pop_back();
      svg += fmt::format(R"(<polyline fill="none" stroke="{}" stroke-width="{}"{} points="{}"/>)", color, s.width,
                         s.dashed ? R"( stroke-dasharray="5 3")" : "", coords);
    }
    if (s.markers || pts.size() == 1) {
      svg += fmt::format(R"(<g fill="{}">)", color);
      for (const auto& [x, y] : pts) {
        svg += fmt::format(R"(<circle cx="{:.1f}" cy="{:.1f}" r="3.5"><title>{}: {} {:g}, {:.6g}</title></circle>)",
                           px(x), py(y), html_escape(s.name), html_escape(chart.x_label), x, y);
      }
      svg += "</g>";
    }
  }
  return svg + "</svg>";
}

}  // namespace gputrain::report::detail
