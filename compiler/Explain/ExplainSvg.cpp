//===- ExplainSvg.cpp - loomc --mesh-svg: the mesh and each param's split -===//
//
// Left, the mesh: a box per rank, the last axis across, the one before it
// down, further axes as panels side by side; with a pipeline, each box is
// colored by its stage. Right, a row per param: its shape, its split as a
// shard spec, and a picture of its first two dims cut into the blocks the
// ranks hold, rank 0's filled.
//
//===----------------------------------------------------------------------===//

#include "Explain/Explain.h"

#include "llvm/Support/FormatVariadic.h"

#include <algorithm>
#include <cctype>

namespace loom {

namespace {
std::string escape(const std::string &text) {
  std::string out;
  for (char c : text)
    out += c == '<' ? "&lt;" : c == '>' ? "&gt;" : c == '&' ? "&amp;" : std::string(1, c);
  return out;
}

std::string shapeText(const std::vector<int64_t> &shape) {
  std::string text = "[";
  for (auto [i, size] : llvm::enumerate(shape))
    text += (i ? ", " : "") + std::to_string(size);
  return text + "]";
}

/// The shard spec of a split: "[_, tp]", "[dp+tp]".
std::string specText(const std::vector<std::vector<std::string>> &split) {
  std::string text = "[";
  for (auto [i, axes] : llvm::enumerate(split)) {
    text += i ? ", " : "";
    if (axes.empty())
      text += "_";
    for (auto [j, axis] : llvm::enumerate(axes))
      text += (j ? "+" : "") + axis;
  }
  return text + "]";
}

const char *kStageColors[] = {"#cfe3f7", "#f7dccf", "#d5f0d2", "#eedcf4",
                              "#f7efc6", "#d2eeee", "#f2d0dc", "#e0e0e0"};
} // namespace

std::string meshSvg(const ExplainReport &r) {
  const double box = 46, gap = 6, left = 20, top = 56;
  size_t n = r.sizes.size();
  int64_t across = n >= 1 ? r.sizes[n - 1] : 1;
  int64_t down = n >= 2 ? r.sizes[n - 2] : 1;
  int64_t panels = std::max<int64_t>(1, r.ranks / (across * down));
  // At most 64 ranks are drawn, or the first panel: a larger mesh shows
  // its first panels, and a panel its first 64 columns and 64 rows (a
  // dp=2^20 x tp=1024 mesh had drawn one panel of 2^30 boxes, and run out
  // of memory).
  int64_t shownAcross = std::min<int64_t>(across, 64);
  int64_t shownDown = std::min<int64_t>(down, 64);
  int64_t shownPanels = std::max<int64_t>(
      1, std::min<int64_t>(panels, 64 / std::max<int64_t>(1, across * down)));
  double panelWidth = shownAcross * (box + gap) + 24;
  double meshWidth = left + shownPanels * panelWidth;
  double meshHeight = top + shownDown * (box + gap) + 40;
  // The legend goes below the panels, with room to spare.
  double legendY = meshHeight + 2;
  // Layer instances hold the same params: "block.3.wq" and "block.0.wq"
  // are one row, "block.*.wq (x4)", when their shapes and splits agree.
  struct Row {
    std::string name;
    const ExplainParam *param;
    int count = 0;
  };
  std::vector<Row> all;
  for (const ExplainParam &p : r.params) {
    std::string name = p.name;
    size_t dot = name.find('.'), next = dot == std::string::npos ? dot : name.find('.', dot + 1);
    if (next != std::string::npos &&
        std::all_of(name.begin() + dot + 1, name.begin() + next, ::isdigit))
      name = name.substr(0, dot) + ".*" + name.substr(next);
    auto same = std::find_if(all.begin(), all.end(), [&](const Row &row) {
      return row.name == name && row.param->shape == p.shape &&
             row.param->split == p.split;
    });
    if (same != all.end())
      ++same->count;
    else
      all.push_back({name, &p, 1});
  }
  size_t rows = std::min<size_t>(all.size(), 40);
  double rowHeight = 34, tableLeft = meshWidth + 30;
  double width = tableLeft + 620;
  double height = std::max(legendY + 16, top + rowHeight * (rows + 1) + 40);

  std::string svg = llvm::formatv(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0}\" height=\"{1}\" "
      "font-family=\"sans-serif\" font-size=\"11\">\n"
      "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n",
      static_cast<int>(width), static_cast<int>(height));
  std::string title = "model " + r.model + ": mesh " + r.grid + " ";
  for (auto [i, name] : llvm::enumerate(r.axes))
    title += (i ? " x " : "") + name + "=" + std::to_string(r.sizes[i]);
  title += ", " + std::to_string(r.ranks) + " ranks";
  svg += llvm::formatv("<text x=\"{0}\" y=\"24\" font-size=\"15\">{1}</text>\n",
                       left, escape(title));
  std::string axesNote = n >= 1 ? "across: " + r.axes[n - 1] : std::string();
  if (n >= 2)
    axesNote += ", down: " + r.axes[n - 2];
  if (n >= 3)
    axesNote += ", panels: the other axes";
  if (shownAcross < across || shownDown < down)
    axesNote += " (the first " + std::to_string(shownDown) + " rows of " +
                std::to_string(shownAcross) + " ranks)";
  else if (shownPanels < panels)
    axesNote += " (the first " + std::to_string(shownPanels * across * down) +
                " ranks)";
  svg += llvm::formatv("<text x=\"{0}\" y=\"42\" fill=\"#555\">{1}</text>\n",
                       left, escape(axesNote));

  // The pipeline axis, whose coordinate colors a rank.
  size_t ppAxis = std::find(r.axes.begin(), r.axes.end(), r.pipelineAxis) - r.axes.begin();
  for (int64_t panel = 0; panel < shownPanels; ++panel) {
    double x0 = left + panel * panelWidth;
    if (n >= 3) {
      // The panel's coordinates on the axes before the last two.
      std::string heading;
      for (size_t i = 0; i + 2 < n; ++i)
        heading += (i ? " " : "") + r.axes[i] + "=" +
                   std::to_string(r.coordinate(panel * down * across, i));
      svg += llvm::formatv("<text x=\"{0}\" y=\"{1}\" fill=\"#333\">{2}</text>\n",
                           x0, top + shownDown * (box + gap) + 12, escape(heading));
    }
    for (int64_t row = 0; row < shownDown; ++row)
      for (int64_t col = 0; col < shownAcross; ++col) {
        int64_t rank = (panel * down + row) * across + col;
        int64_t pp = r.stages && ppAxis < n ? r.coordinate(rank, ppAxis) : 0;
        double x = x0 + col * (box + gap), y = top + row * (box + gap);
        svg += llvm::formatv(
            "<rect x=\"{0}\" y=\"{1}\" width=\"{2}\" height=\"{2}\" rx=\"4\" "
            "fill=\"{3}\" stroke=\"#333\"/>\n"
            "<text x=\"{4}\" y=\"{5}\" text-anchor=\"middle\">{6}</text>\n",
            x, y, box, kStageColors[pp % 8], x + box / 2, y + box / 2 + 4, rank);
        if (r.stages)
          svg += llvm::formatv("<text x=\"{0}\" y=\"{1}\" text-anchor=\"middle\" "
                               "font-size=\"9\" fill=\"#555\">{2}={3}</text>\n",
                               x + box / 2, y + box - 5, r.pipelineAxis, pp);
      }
  }
  if (r.stages)
    svg += llvm::formatv("<text x=\"{0}\" y=\"{1}\" fill=\"#555\">color: the '{2}' "
                         "coordinate ({3} stages)</text>\n",
                         left, legendY, escape(r.pipelineAxis), r.stages);

  // The params: name, shape, spec, rank 0's block, and the cut.
  svg += llvm::formatv("<text x=\"{0}\" y=\"{1}\" font-weight=\"bold\">param"
                       "</text><text x=\"{2}\" y=\"{1}\" font-weight=\"bold\">"
                       "shape, split, one rank's block</text>\n",
                       tableLeft, top - 8, tableLeft + 250);
  for (size_t i = 0; i < rows; ++i) {
    const ExplainParam &p = *all[i].param;
    double y = top + i * rowHeight;
    std::string name = all[i].name;
    if (all[i].count > 1)
      name += " (x" + std::to_string(all[i].count) + ")";
    svg += llvm::formatv("<text x=\"{0}\" y=\"{1}\">{2}</text>\n", tableLeft,
                         y + 18, escape(name));
    svg += llvm::formatv("<text x=\"{0}\" y=\"{1}\">{2} shard {3}: {4}, {5}</text>\n",
                         tableLeft + 250, y + 18, shapeText(p.shape),
                         escape(specText(p.split)), shapeText(p.local),
                         formatBytes(p.localBytes));
    // The first two dims (a vector: one row), cut into blocks.
    double w = 80, h = p.shape.size() >= 2 ? 24 : 8, x = tableLeft + 150;
    int64_t cutsDown = p.shape.size() >= 2 && p.local[0] ? p.shape[0] / p.local[0] : 1;
    int64_t cutsAcross = p.shape.empty() || !p.local.back()
                             ? 1
                             : p.shape.back() / p.local.back();
    if (p.shape.size() == 1)
      cutsDown = 1;
    svg += llvm::formatv("<rect x=\"{0}\" y=\"{1}\" width=\"{2}\" height=\"{3}\" "
                         "fill=\"#f4f4f4\" stroke=\"#333\"/>\n",
                         x, y + 4, w, h);
    svg += llvm::formatv("<rect x=\"{0}\" y=\"{1}\" width=\"{2}\" height=\"{3}\" "
                         "fill=\"#7fa7d9\"/>\n",
                         x, y + 4, w / cutsAcross, h / cutsDown);
    for (int64_t c = 1; c < cutsAcross && cutsAcross <= 64; ++c)
      svg += llvm::formatv("<line x1=\"{0}\" y1=\"{1}\" x2=\"{0}\" y2=\"{2}\" "
                           "stroke=\"#333\" stroke-width=\"0.6\"/>\n",
                           x + c * w / cutsAcross, y + 4, y + 4 + h);
    for (int64_t c = 1; c < cutsDown && cutsDown <= 64; ++c)
      svg += llvm::formatv("<line x1=\"{0}\" y1=\"{1}\" x2=\"{2}\" y2=\"{1}\" "
                           "stroke=\"#333\" stroke-width=\"0.6\"/>\n",
                           x, y + 4 + c * h / cutsDown, x + w);
  }
  if (all.size() > rows)
    svg += llvm::formatv("<text x=\"{0}\" y=\"{1}\" fill=\"#555\">... and {2} "
                         "more rows of params</text>\n",
                         tableLeft, top + rows * rowHeight + 18,
                         all.size() - rows);
  svg += "</svg>\n";
  return svg;
}

} // namespace loom
