#include "luong/cloze/cloze_run.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <ostream>

#include "luong/cloze/cloze_kernels.h"
#include "luong/cloze/udhr_corpus.h"
#include "luong/util/atomic_file.h"
#include "luong/util/error.h"
#include "luong/util/plot.h"
#include "luong/util/threads.h"

namespace luong::cloze {
namespace fs = std::filesystem;

double cloze_sentence_flops(const ClozeDims& m, int n) {
  const double projections = 2.0 * n * m.d * (2.0 * m.dk + m.dv);       // Q, K, V
  const double attention = 2.0 * n * n * m.dk + 2.0 * n * n * m.dv;      // S, Z
  const double readout = 2.0 * n * m.dv * m.vocab;                        // scores
  // Backward: two products per forward product (input and weight gradients); X's gradient for the
  // embedding is a scatter, not counted.
  return 3.0 * (projections + attention + readout);
}

namespace {

std::string format_fixed(double v) {
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, "%.6f", v);
  return buffer;
}

ClozeParameters initial_parameters(const ClozeRunOptions& options, const ClozeDims& dims) {
  ClozeParameters params(dims);
  if (options.init == ClozeInit::kNumpy) {
    init_numpy(params, static_cast<unsigned>(options.seed));
  } else {
    if (!options.torch_randn) throw Error("--init torch needs LibTorch, which this build cannot load");
    const std::vector<double> draws = options.torch_randn(params.data.size(), static_cast<unsigned>(options.seed));
    for (std::size_t i = 0; i < params.data.size(); ++i) params.data[i] = 0.1 * draws[i];
  }
  return params;
}

// The display sentence's ids, after checking that the corpus holds it.
std::vector<int> display_ids(const ClozeCorpus& corpus, std::ostream& out) {
  const auto& display = display_sentence();
  if (std::find(corpus.sentences.begin(), corpus.sentences.end(), display) == corpus.sentences.end()) {
    throw Error("display sentence not found in the corpus");
  }
  std::string joined;
  for (const auto& token : display) joined += (joined.empty() ? "" : " ") + token;
  out << "[B-display] display tokens: " << joined << "\n";
  std::vector<int> ids;
  for (const auto& token : display) ids.push_back(corpus.id(token));
  return ids;
}

void write_csvs(const ClozeRunReport& report, int n, const std::string& out_dir, std::ostream& out) {
  const std::string loss_path = (fs::path(out_dir) / "attention_loss.csv").string();
  write_file_atomically(loss_path, [&](std::ostream& csv) {
    csv << "iter,loss\n";
    for (const auto& [update, loss] : report.loss_curve) csv << format_fixed(update) << "," << format_fixed(loss) << "\n";
  });
  out << "[B-csv] saved " << loss_path << "\n";
  const std::string weights_path = (fs::path(out_dir) / "attention_weights.csv").string();
  write_file_atomically(weights_path, [&](std::ostream& csv) {
    csv << "q,k,w\n";
    for (int q = 0; q < n; ++q) {
      for (int k = 0; k < n; ++k) {
        csv << format_fixed(q) << "," << format_fixed(k) << "," << format_fixed(report.display_attention[static_cast<std::size_t>(q * n + k)]) << "\n";
      }
    }
  });
  out << "[B-csv] saved " << weights_path << "\n";
}

// The loss curve beside the display sentence's attention.
void write_preview(const ClozeRunReport& report, int n, const std::string& out_dir, std::ostream& out) {
  LineSeries curve;
  for (const auto& [update, loss] : report.loss_curve) {
    curve.x.push_back(update);
    curve.y.push_back(loss);
  }
  HeatMap map;
  map.values.assign(static_cast<std::size_t>(n), std::vector<double>(static_cast<std::size_t>(n)));
  for (int q = 0; q < n; ++q) {
    for (int k = 0; k < n; ++k) map.values[static_cast<std::size_t>(q)][static_cast<std::size_t>(k)] = report.display_attention[static_cast<std::size_t>(q * n + k)];
  }
  map.row_labels = map.column_labels = display_sentence();
  map.title = "learned attention weights";
  map.x_label = "key token (searched)";
  map.y_label = "query token (searching)";
  const HeatMapLayout layout = heat_map_layout(map, 26);
  Figure figure(460 + layout.width, std::max(420, layout.height));
  figure.line_chart({0, 0, 450, 420}, {"training loss", "update", "loss per predicted token", {curve}});
  figure.heat_map(460, 0, map, 26);
  const std::string png_path = (fs::path(out_dir) / "attention.png").string();
  figure.save_png(png_path);
  out << "[B-preview] saved " << png_path << "\n";
}

}  // namespace

ClozeRunReport run_cloze(const ClozeRunOptions& options, std::ostream& out) {
  options::check_ranges(options, [](const options::Info& info) { return std::string("--") + info.flag; });
  std::error_code ec;
  fs::create_directories(options.out_dir, ec);
  if (!fs::is_directory(options.out_dir)) throw Error(printable(options.out_dir) + ": cannot create output directory");

  const ClozeCorpus corpus = make_cloze_corpus();
  out << "[B-tokens] " << corpus.sentences.size() << " sentences, " << corpus.vocabulary.size() << " distinct tokens\n";

  ClozeDims dims;
  dims.vocab = static_cast<int>(corpus.vocabulary.size());
  ClozeParameters params = initial_parameters(options, dims);

  const int threads = options.threads > 0 ? static_cast<int>(options.threads) : available_cores();
  ClozeRunReport report;
  const ClozeTrainResult trained = train_cloze(params, corpus.ids, static_cast<int>(options.updates), threads);
  report.loss_curve = trained.loss_curve;
  report.train_seconds = trained.seconds;
  double flops_per_update = 0;
  for (const auto& ids : corpus.ids) flops_per_update += cloze_sentence_flops(dims, static_cast<int>(ids.size()));
  report.gflop = flops_per_update * static_cast<double>(options.updates) / 1e9;

  char line[160];
  std::snprintf(line, sizeof line, "[B-train] initial loss = %.4f, final loss = %.4f", report.loss_curve.front().second,
                report.loss_curve.back().second);
  out << line << "\n";
  std::snprintf(line, sizeof line, "[B-train] %lld updates in %.3f s on %d threads: %.2f GFLOP, %.2f GFLOP/s",
                static_cast<long long>(options.updates), report.train_seconds, threads, report.gflop, report.gflop / report.train_seconds);
  out << line << "\n";

  const std::vector<int> ids = display_ids(corpus, out);
  const int n = static_cast<int>(ids.size());
  report.display_attention = cloze_attention(params, ids.data(), n);
  write_csvs(report, n, options.out_dir, out);
  write_preview(report, n, options.out_dir, out);
  return report;
}

}  // namespace luong::cloze
