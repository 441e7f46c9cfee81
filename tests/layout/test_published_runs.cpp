// The layout planner against runs that others published (tests/layout/data/published_runs.json, with sources):
// Megatron-LM's weak-scaling table (Narayanan et al. 2021, Table 1), the layouts its authors chose and the
// throughput they measured; Korthikanti et al. 2022's gain from selective recomputation. docs/layout.md,
// "Checked against published runs", has the table this test prints.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <utility>
#include <vector>

#include "dualpipe/layout/layout.h"
#include "layout/published_runs.h"
#include "layout/search_request.h"

namespace dualpipe::layout {
namespace {

using test::published_figures;

struct Row {
  double parameters_b, tflops;
  int heads, hidden, layers, tp, pp, vpp, mbs, gpus, batch;
  bool torch_ddp;
};

std::vector<Row> narayanan_rows() {
  std::vector<Row> rows;
  const nlohmann::json table = published_figures("narayanan2021");
  for (const auto& r : table.at("rows"))
    rows.push_back({r.at("parameters_b"), r.at("tflops_per_gpu"), r.at("heads"), r.at("hidden"), r.at("layers"),
                    r.at("tp"), r.at("pp"), r.at("vpp"), r.at("mbs"), r.at("gpus"), r.at("batch"),
                    r.at("ddp") == "torch"});
  return rows;
}

ModelSpec gpt(const Row& r) {
  const nlohmann::json table = published_figures("narayanan2021");
  ModelSpec m;
  m.name = "gpt-" + std::to_string(r.parameters_b);
  m.layers = r.layers, m.hidden = r.hidden, m.heads = r.heads, m.ffn_hidden = 4 * r.hidden;
  m.vocab = table.at("vocab"), m.seq_len = table.at("seq_len"), m.tied_embeddings = true;
  return m;
}

ClusterSpec selene(const Row& r) {
  const std::string preset = published_figures("narayanan2021").at("cluster");
  return cluster_spec(preset + "x" + std::to_string(r.gpus));
}

// What the software offered, and this run's gradient reduction (PyTorch's DDP overlaps it, Megatron's own does not).
LayoutFix software(const Row& r) {
  return LayoutFix::parse(published_figures("narayanan2021").at("software").get<std::string>() +
                          ",dp_overlap=" + (r.torch_ddp ? "1" : "0"));
}

Layout published_layout(const Row& r) {
  Layout l;
  l.tp = r.tp, l.pp = r.pp, l.vpp = r.vpp, l.dp = r.gpus / (r.tp * r.pp), l.micro_batch_size = r.mbs;
  l.zero = 0, l.recompute = Recompute::Full;
  l.schedule = r.pp == 1 ? "none" : r.vpp == 1 ? "1f1b" : "interleaved-1f1b";
  software(r).apply(l);
  return l;
}

// The paper's equation 3, FLOPs of an iteration with full recomputation, from the table's own figures.
double paper_flops(const Row& r, double seq, double vocab) {
  const double h = r.hidden, l = r.layers;
  return 96 * r.batch * seq * l * h * h * (1 + seq / (6 * h) + vocab / (16 * l * h));
}

// The throughput the time model predicts for the published layout, in the paper's TFLOP/s.
double predicted_tflops(const Row& r, const ClusterSpec& cluster) {
  const ModelSpec model = gpt(r);
  const LayoutResult result = evaluate_layout(model, cluster, r.batch, published_layout(r));
  return paper_flops(r, model.seq_len, model.vocab) / (result.time.step * r.gpus) / 1e12;
}

// 1-based rank of the published (tp, pp) among the search's distinct (tp, pp) in order; 0: not among them.
int published_rank(const Row& r) {
  LayoutRequest request = test::search_request(gpt(r), "a100-80gx" + std::to_string(r.gpus), r.batch, "", 100000);
  request.fix = software(r);
  std::vector<std::pair<int, int>> seen;
  for (const LayoutResult& row : search_layouts(request).ranked) {
    const std::pair<int, int> tp_pp{row.layout.tp, row.layout.pp};
    if (std::find(seen.begin(), seen.end(), tp_pp) == seen.end()) seen.push_back(tp_pp);
  }
  const auto it = std::find(seen.begin(), seen.end(), std::pair{r.tp, r.pp});
  return it == seen.end() ? 0 : int(it - seen.begin()) + 1;
}

// Target: for at least 8 of the 10 rows, the published (tp, pp) among the first three distinct choices and the
// predicted TFLOP/s within 10% of the published.
TEST(PublishedRuns, NarayananTableOneLayoutsRankAndThroughputsMatch) {
  int both = 0;
  std::printf("  params  published      rank  TFLOP/s published  predicted  error\n");
  for (const Row& r : narayanan_rows()) {
    const int rank = published_rank(r);
    const double tflops = predicted_tflops(r, selene(r)), error = tflops / r.tflops - 1;
    both += rank >= 1 && rank <= 3 && std::abs(error) <= 0.10;
    std::printf("%8.1fB tp%d pp%-3d vpp%d %6d %18.0f %10.1f %+6.1f%%\n", r.parameters_b, r.tp, r.pp, r.vpp, rank,
                r.tflops, tflops, 100 * error);
  }
  EXPECT_GE(both, 8);
}

// The planner's executed FLOPs (recomputation included) are the paper's count: two independent formulas.
TEST(PublishedRuns, ExecutedFlopsAreThePapersCount) {
  for (const Row& r : narayanan_rows()) {
    const ModelSpec model = gpt(r);
    const double tokens = double(r.batch) * model.seq_len;
    EXPECT_NEAR(executed_flops_per_token(model, Recompute::Full, false) * tokens /
                    paper_flops(r, model.seq_len, model.vocab),
                1, 0.005)
        << model.name;
  }
}

// Two constants of the time model were fitted on the table: matmul_efficiency and memory_efficiency (every other
// is a datasheet's, NCCL's or an assumption stated in docs/layout.md). This refits them on a grid by the mean
// squared relative error of the throughput and checks the shipped values are the grid's best, and plausible.
TEST(PublishedRuns, TheFittedEfficienciesAreTheTablesFitAndPlausible) {
  const std::vector<Row> rows = narayanan_rows();
  double best_error = 1e300, best_matmul = 0, best_memory = 0;
  for (const double matmul : {0.64, 0.66, 0.68, 0.70, 0.72, 0.74, 0.76, 0.78, 0.80})
    for (const double memory : {0.5, 0.6, 0.7, 0.8, 0.9, 1.0}) {
      double error = 0;
      for (const Row& r : rows) {
        ClusterSpec cluster = selene(r);
        cluster.matmul_efficiency = matmul, cluster.memory_efficiency = memory;
        error += std::pow(predicted_tflops(r, cluster) / r.tflops - 1, 2);
      }
      if (error < best_error) best_error = error, best_matmul = matmul, best_memory = memory;
    }
  std::printf("fitted on Narayanan 2021 Table 1: matmul_efficiency %.2f, memory_efficiency %.2f (rms error %.1f%%)\n",
              best_matmul, best_memory, 100 * std::sqrt(best_error / rows.size()));
  EXPECT_DOUBLE_EQ(best_matmul, kFittedMatmulEfficiency);
  EXPECT_DOUBLE_EQ(best_memory, kFittedMemoryEfficiency);
  const ClusterSpec defaults = cluster_spec("a100-80gx8");
  EXPECT_EQ(defaults.matmul_efficiency, kFittedMatmulEfficiency);
  EXPECT_EQ(defaults.memory_efficiency, kFittedMemoryEfficiency);
  // Plausible: a share of the datasheet's peak and bandwidth, never above it.
  for (const double share : {defaults.matmul_efficiency, defaults.memory_efficiency, defaults.link_efficiency}) {
    EXPECT_GT(share, 0);
    EXPECT_LE(share, 1);
  }
}

// Another generation, without refitting: Megatron-LM's H100 weak-scaling table (its README) against the two
// efficiencies fitted on 2021's A100 table. The published TP and PP are fixed with what Megatron-Core offers; the
// search picks what the table leaves out (micro-batch size, virtual stages, recomputation). Issue 74 asks for the
// count of rows whose (TP, PP) is among the first three and whose throughput is within 10%, per generation: this
// prints it. FlashAttention runs at the H100's own share of peak (attention_efficiency: FlashAttention-2's 35% there,
// its authors' figure, against 72% on an A100), which weighs most on the small models, whose attention is the
// largest share of their work (4096 tokens against hidden sizes from 2304): at the products' 70% they were
// over-predicted by 35%, 20% and 10%, and 4 of the 9 rows met both.
TEST(PublishedRuns, MegatronsH100TableAgainstTheA100Fit) {
  const nlohmann::json table = published_figures("megatron_h100");
  const double seq = table.at("seq_len"), vocab = table.at("vocab");
  const LayoutFix software = LayoutFix::parse(table.at("software").get<std::string>());
  int both = 0, within = 0, ranked = 0;
  std::printf("  params  published  rank  TFLOP/s published  predicted  error\n");
  for (const auto& r : table.at("rows")) {
    ModelSpec model;
    model.name = "gpt-h100", model.layers = r.at("layers"), model.hidden = r.at("hidden"), model.heads = r.at("heads");
    model.ffn_hidden = 4 * model.hidden, model.vocab = vocab, model.seq_len = seq, model.tied_embeddings = false;
    const int tp = r.at("tp"), pp = r.at("pp"), gpus = r.at("gpus"), batch = r.at("batch");
    const std::string cluster = table.at("cluster").get<std::string>() + "x" + std::to_string(gpus);

    LayoutRequest request = test::search_request(model, cluster, batch, "", 10000);
    request.fix = software;
    std::vector<std::pair<int, int>> seen;
    for (const LayoutResult& row : search_layouts(request).ranked)
      if (std::find(seen.begin(), seen.end(), std::pair{row.layout.tp, row.layout.pp}) == seen.end())
        seen.emplace_back(row.layout.tp, row.layout.pp);
    const auto at = std::find(seen.begin(), seen.end(), std::pair{tp, pp});
    const int rank = at == seen.end() ? 0 : int(at - seen.begin()) + 1;

    request.fix.tp = tp, request.fix.pp = pp;
    const LayoutSearch best = search_layouts(request);
    ASSERT_FALSE(best.ranked.empty()) << r.dump();
    const double h = model.hidden, l = model.layers;
    const double flops = 12 * batch * seq * l * h * h * (6 + seq / h + vocab / (2 * l * h));
    const double tflops = flops / (best.ranked.front().time.step * gpus) / 1e12;
    const double error = tflops / r.at("tflops_per_gpu").get<double>() - 1;
    ranked += rank >= 1 && rank <= 3, within += std::abs(error) <= 0.10;
    both += rank >= 1 && rank <= 3 && std::abs(error) <= 0.10;
    std::printf("%7.1fB tp%d pp%-3d %5d %18.1f %10.1f %+6.1f%%\n", r.at("parameters_b").get<double>(), tp, pp, rank,
                r.at("tflops_per_gpu").get<double>(), tflops, 100 * error);
  }
  std::printf("H100 (Megatron-LM's table): %d of 9 rows with (TP, PP) in the first three and the throughput within 10%% "
              "(%d ranked, %d within)\n", both, ranked, within);
  // The state measured, not a target: a change to the time model that loses one of them should say so. 6 with the
  // products at one share of peak whatever the GPU (2026-12-06); 5 since the output's write follows the main loop
  // (2026-12-07), which refits the A100 table better but puts the 70B's published tp8 pp2 fourth, 0.2% of the
  // step behind the third.
  EXPECT_GE(both, 5);
}

// Korthikanti et al.: selective recomputation with sequence parallelism runs the 530B model at 54.2% MFU where
// full recomputation ran at 42.1%: 1.29 times as fast. The model's two steps for the same layout, within 10%.
TEST(PublishedRuns, SelectiveRecomputationGainsWhatKorthikantiMeasured) {
  const nlohmann::json run = published_figures("korthikanti2022_recomputation");
  Row r{529.6, 0, 128, 20480, 105, 8, 35, 1, 1, run.at("gpus"), run.at("batch"), false};
  const ModelSpec model = gpt(r);
  const ClusterSpec cluster = cluster_spec("a100-80gx" + std::to_string(r.gpus));
  LayoutRequest request = test::search_request(model, "a100-80gx" + std::to_string(r.gpus), r.batch, "", 1);
  const auto step = [&](const std::string& recompute) {
    request.fix = LayoutFix::parse(run.at("layout").get<std::string>() + "," + recompute);
    const LayoutSearch search = search_layouts(request);
    EXPECT_FALSE(search.ranked.empty());
    EXPECT_TRUE(search.ranked.front().fits) << recompute;
    return search.ranked.front().time.step;
  };
  const double measured = run.at("mfu_selective_sp").get<double>() / run.at("mfu_full").get<double>();
  const double predicted = step("recompute=full,sp=0") / step("recompute=selective,sp=1");
  std::printf("selective over full recomputation: %.3f measured, %.3f predicted\n", measured, predicted);
  EXPECT_NEAR(predicted / measured, 1, 0.10);
}

}  // namespace
}  // namespace dualpipe::layout
