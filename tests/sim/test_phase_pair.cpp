// The overlapped pair timed phase by phase and with its halves on two threads (sim/phase_pair.h) against timelines
// worked out by hand, and against the bounds any interleave must respect; the shared phase order
// (schedule/phase_order.h) against DeepSeek's.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <string>

#include "dualpipe/schedule/phase_order.h"
#include "dualpipe/sim/cost_model.h"
#include "dualpipe/sim/phase_pair.h"
#include "test_helpers.h"

namespace dualpipe {
namespace {

TEST(PhaseOrder, OneLayerEachIsDeepSeeksPublishedOrder) {
  // Forward: attn (starts the dispatch), mlp (starts the combine), combine. Backward: combine (starts its exchange),
  // mlp (starts the dispatch's), mlp W, attn, attn W.
  const std::vector<PhaseStep> forward = {{true, false}, {true, false}, {false, false}};
  const std::vector<PhaseStep> backward = {{true, false}, {true, false}, {false, true}, {false, false}, {false, true}};
  std::string order;
  const char* const forward_names[] = {"attn(F)", "mlp(F)", "combine(F)"};
  const char* const backward_names[] = {"combine(B)", "mlp(B)", "mlp(W)", "attn(B)", "attn(W)"};
  for (const PhaseTurn& t : interleaved_phase_order(backward, forward))
    order += std::string(t.chain == 'B' ? backward_names[t.index] : forward_names[t.index]) + " ";
  // DeepSeek-V3's overlapped chunk pair, with its communication phases (dispatch, combine) left out: they are the
  // exchanges under way between our phases.
  EXPECT_EQ(order, "combine(B) attn(F) mlp(B) mlp(W) mlp(F) attn(B) attn(W) combine(F) ");
}

TEST(PhasedPair, HidesEveryExchangeWhenComputeCoversThem) {
  // F=4, I=4, W=2, a2a=4 each way, one layer: exchanges of 2. By hand (B: backward, F: forward; X: exchange):
  //   B combine  [0,0]  XB1 [0,2]     F attn [0,2]  XF1 [2,4]     B mlp [2,4]  XB2 [4,6]    B mlp W [4,5]
  //   F mlp [5,7]  XF2 [7,9]          B attn + W [7,10]           F combine [10,10]
  const PairTiming t = time_phased_pair({4, 4, 1, 4, 2, 4, 1});
  EXPECT_DOUBLE_EQ(t.duration, 10);
  EXPECT_DOUBLE_EQ(t.waiting, 0);
}

TEST(PhasedPair, ExchangesUnderWayAtOnceShareTheLink) {
  // The same with a2a=8 (exchanges of 4). XB1 runs alone over [0,2] (2 done), then beside XF1 at half speed: it ends
  // at 6, XF1 (2 of 4 done by then) at 8. B mlp waits [2,6] and runs [6,8]; XB2 from 8; B mlp W [8,9]; F mlp [9,11];
  // XB2 alone [8,11] (3 done), beside XF2 from 11: ends at 13, XF2 (1 done) at 16. B attn waits [11,13], runs
  // [13,16]; F combine waits for nothing more: 16, with 4 + 2 waited.
  const PairTiming t = time_phased_pair({4, 8, 1, 4, 2, 8, 1});
  EXPECT_DOUBLE_EQ(t.duration, 16);
  EXPECT_DOUBLE_EQ(t.waiting, 6);
}

TEST(PhasedPair, AnExchangesLatencyIsNotShared) {
  // The same exchanges of 4, each 2 of bytes and 2 of latency. XB1's bytes [0,2] alone, it ends at 4; F attn [0,2];
  // XF1's bytes [2,4] alone, it ends at 6. B mlp waits [2,4], runs [4,6]; XB2 bytes [6,8], ends 10; B mlp W [6,7];
  // F mlp [7,9]; XF2 bytes [9,11], ends 13. B attn waits [9,10], runs [10,13]; F combine: 13, 2 + 1 waited.
  PairHalves p{4, 8, 1, 4, 2, 8, 1};
  p.exchange_latency = 2;
  EXPECT_DOUBLE_EQ(time_phased_pair(p).duration, 13);
  EXPECT_DOUBLE_EQ(time_phased_pair(p).waiting, 3);
  // 3 of bytes and 1 of latency. XB1's bytes: 2 alone [0,2], beside XF1's from 2 at half speed, end at 4 (it ends at
  // 5); XF1's: 1 done by 4, 2 alone [4,6] (it ends at 7). B mlp waits [2,5], runs [5,7]; XB2 bytes [7,10] alone, ends
  // 11; B mlp W [7,8]; F mlp [8,10]; XF2 bytes [10,13], ends 14. B attn waits [10,11], runs [11,14]; F combine: 14.
  p.exchange_latency = 1;
  EXPECT_DOUBLE_EQ(time_phased_pair(p).duration, 14);
  EXPECT_DOUBLE_EQ(time_phased_pair(p).waiting, 4);
  // All latency: XB1 [0,4], XF1 [2,6] at full speed beside it; the rest as with 2, the bytes never having met.
  p.exchange_latency = 4;
  EXPECT_DOUBLE_EQ(time_phased_pair(p).duration, 13);
  // Latency longer than an exchange is all of it.
  p.exchange_latency = 10;
  EXPECT_DOUBLE_EQ(time_phased_pair(p).duration, 13);
}

// Both timings of a pair (one thread's phases, two threads' halves), for the properties they share.
constexpr PairTiming (*kTimings[])(const PairHalves&) = {time_phased_pair, time_threaded_pair};

TEST(PairTimings, StayWithinTheBoundsOfAnyInterleave) {
  // No faster than its compute or its link's work (the exchanges' bytes), no slower than the halves one after the
  // other, exchanges exposed; waiting is what the pair adds to its compute.
  std::mt19937 random(7);
  std::uniform_real_distribution<double> cost(0.1, 10);
  std::uniform_int_distribution<int> layers(1, 4);
  for (int i = 0; i < 500; ++i) {
    PairHalves p{cost(random), cost(random), layers(random), cost(random), cost(random), cost(random), layers(random)};
    if (i % 2) p.exchange_latency = cost(random) / 4;  // the link carries only the rest of each exchange
    const double compute = p.forward + p.input + p.weight;
    const auto bytes = [&](double exchanges, int l) {
      return exchanges - 2 * l * std::min(p.exchange_latency, exchanges / (2 * l));
    };
    const double link = bytes(p.forward_exchanges, p.forward_layers) + bytes(p.backward_exchanges, p.backward_layers);
    for (const auto timing : kTimings) {
      const PairTiming t = timing(p);
      EXPECT_GE(t.duration, std::max(compute, link) - 1e-9) << i;
      EXPECT_LE(t.duration, compute + p.forward_exchanges + p.backward_exchanges + 1e-9) << i;
      EXPECT_NEAR(t.duration, compute + t.waiting, 1e-9) << i;
    }
  }
}

TEST(PairTimings, AnExchangeTooSmallForTheClockEndsAsItStarts) {
  // fuzz_cost's finding: exchanges of 4e-224 against a clock at 2e298 (one ulp: 4e282). Timing them never moved the
  // clock on, and the pair hung; now they end as they start, hidden.
  const PairHalves p{2.0459e+298, 7.49322e-224, 1, 1.71154e+259, 1.71154e+259, 7.49322e-224, 1};
  for (const auto timing : kTimings) {
    const PairTiming t = timing(p);
    EXPECT_DOUBLE_EQ(t.duration, p.forward + p.input + p.weight);
    EXPECT_EQ(t.waiting, 0);
  }
}

TEST(ThreadedPair, EachHalfWaitsWhereItStartsAnExchange) {
  // The second timeline above with the halves on two threads. The backward in autograd's order: combine X [0],
  // mlp I+W then X, attn I+W (3 each). XB1 [0,6] (beside XF1 from 2), F attn [0,2], XF1 [2,8]; B mlp [6,9], XB2
  // from 9; F waits for the device until 9: mlp [9,11], XF2 from 11; XB2 ends at 15 (2 alone, 2 at half speed),
  // XF2 at 17; B attn [15,18]; F combine [18,18]. 8 waited where the phases waited 6: each half waits for its
  // own exchange at once instead of computing its weight gradients meanwhile.
  const PairTiming t = time_threaded_pair({4, 8, 1, 4, 2, 8, 1});
  EXPECT_DOUBLE_EQ(t.duration, 18);
  EXPECT_DOUBLE_EQ(t.waiting, 8);
  // Exchanges short enough for the other half's compute to cover them: nothing waited.
  const PairTiming hidden = time_threaded_pair({4, 4, 1, 4, 2, 4, 1});
  EXPECT_DOUBLE_EQ(hidden.duration, 10);
  EXPECT_DOUBLE_EQ(hidden.waiting, 0);
  // Exchanges of 4 as 2 of bytes and 2 of latency: XB1 bytes [0,2], ends 4; F attn [0,2]; XF1 bytes [2,4], ends 6;
  // B mlp [4,7]; XB2 bytes [7,9], ends 11; F mlp [7,9] (the device free at 7); XF2 bytes [9,11], ends 13; B attn
  // [11,14]; F combine [14,14]. 4 waited.
  const PairTiming latency = time_threaded_pair({4, 8, 1, 4, 2, 8, 1, 2});
  EXPECT_DOUBLE_EQ(latency.duration, 14);
  EXPECT_DOUBLE_EQ(latency.waiting, 4);
}

// The two-thread pair stepped through time in ticks of 1/1024, written from the model's description alone (costs in
// quarters, so that every event falls on a tick): each half a list of (compute, exchange) steps; the device to the
// half that has waited for it longest, the backward on a tie; the exchanges' bytes under way sharing the link
// equally, each exchange's latency (at most all of it) after its bytes, unshared.
double threaded_pair_by_ticks(double f, double i, double w, double a2a, int layers, double latency = 0) {
  struct Step {
    double compute, exchange;
  };
  std::vector<Step> halves[2];  // 0: the backward, in autograd's order; 1: the forward
  const double x = a2a / (2 * layers), fi = (i + w) / (2 * layers), ff = f / (2 * layers);
  for (int l = 0; l < layers; ++l) {
    halves[0].insert(halves[0].end(), {{0, x}, {fi, x}, {fi, 0}});
    halves[1].insert(halves[1].end(), {{ff, x}, {ff, x}});
  }
  halves[1].push_back({0, 0});
  const double tick = 1.0 / 1024;
  size_t next[2] = {0, 0};
  double ready[2] = {0, 0}, computing_until[2] = {-1, -1}, exchange_left[2] = {0, 0}, latency_left[2] = {0, 0};
  bool computing[2] = {false, false}, exchanging[2] = {false, false};
  double now = 0;
  const auto busy = [&] { return computing[0] || computing[1]; };
  const auto done = [&](int h) { return next[h] == halves[h].size() && !computing[h] && !exchanging[h]; };
  while (!done(0) || !done(1)) {
    for (bool changed = true; changed;) {  // every transition due now, zero-length ones included
      changed = false;
      for (int h = 0; h < 2; ++h) {
        if (computing[h] && computing_until[h] <= now) {
          computing[h] = false;
          const double e = halves[h][next[h] - 1].exchange;
          if (e > 0) {
            exchanging[h] = true;
            latency_left[h] = std::min(latency, e);
            exchange_left[h] = e - latency_left[h];
          } else {
            ready[h] = now;
          }
          changed = true;
        }
        if (exchanging[h] && exchange_left[h] <= 1e-12 && latency_left[h] <= 1e-12) {
          exchanging[h] = false;
          ready[h] = now;
          changed = true;
        }
      }
      if (!busy()) {
        int pick = -1;
        for (int h = 0; h < 2; ++h)
          if (!computing[h] && !exchanging[h] && next[h] < halves[h].size() && (pick < 0 || ready[h] < ready[pick]))
            pick = h;
        if (pick >= 0) {
          computing[pick] = true;
          computing_until[pick] = now + halves[pick][next[pick]++].compute;
          changed = true;
        }
      }
    }
    if (done(0) && done(1)) break;
    const auto sending = [&](int h) { return exchanging[h] && exchange_left[h] > 1e-12; };
    const int sharing = static_cast<int>(sending(0)) + static_cast<int>(sending(1));
    for (int h = 0; h < 2; ++h) {
      if (sending(h)) {
        exchange_left[h] -= tick / sharing;
      } else if (exchanging[h]) {
        latency_left[h] -= tick;
      }
    }
    now += tick;
  }
  return now;
}

TEST(ThreadedPair, MatchesThePairSteppedThroughTime) {
  std::mt19937 random(5);
  std::uniform_int_distribution<int> quarters(0, 24);
  std::uniform_int_distribution<int> layers(1, 3);
  for (int n = 0; n < 60; ++n) {
    const int l = layers(random);
    // Costs of 2L x quarters, so that each phase is a whole number of quarters.
    const auto cost = [&] { return 2.0 * l * (1 + quarters(random)) / 4; };
    const double f = cost(), i = cost(), w = cost() - 2.0 * l / 4, a2a = cost();
    // Every other pair with a latency of whole quarters, up to beyond a whole exchange.
    const double latency = n % 2 ? quarters(random) / 4.0 : 0;
    const PairTiming t = time_threaded_pair({f, a2a, l, i, w, a2a, l, latency});
    EXPECT_NEAR(t.duration, threaded_pair_by_ticks(f, i, w, a2a, l, latency), 1e-6)
        << "F=" << f << " I=" << i << " W=" << w << " a2a=" << a2a << " layers=" << l << " latency=" << latency;
  }
}

TEST(ThreadedPair, ThePairCostKeyChoosesIt) {
  const CostModel threads = CostModel::parse("F=4,B=6,W=2,a2a=8,pair=threads");
  EXPECT_DOUBLE_EQ(threads.overlapped_pair(), 18);
  EXPECT_DOUBLE_EQ(CostModel::parse("F=4,B=6,W=2,a2a=8,pair=phases").overlapped_pair(), 16);
  EXPECT_TRUE(test::contains(threads.to_string(), ",a2a=8,pair=threads")) << threads.to_string();
  EXPECT_FALSE(test::contains(CostModel::parse("F=4,B=6,W=2,a2a=8").to_string(), "pair"));
  // Without overlap: the forward, then the backward, each waiting for its exchanges (4 + 8 + 6 + 8).
  const CostModel off = CostModel::parse("F=4,B=6,W=2,a2a=8,pair=off");
  EXPECT_DOUBLE_EQ(off.overlapped_pair(), 26);
  EXPECT_TRUE(test::contains(off.to_string(), ",a2a=8,pair=off")) << off.to_string();
  EXPECT_TRUE(test::contains(test::error_message([] { CostModel::parse("pair=both"); }),
                             "pair (how an overlapped pair runs its halves) must be phases, threads or off, got "
                             "pair=both"));
}

TEST(PhasedBackward, ALoneBackwardRunsItsChainOfPhases) {
  // B=6, W=2 (I=4), a2a=8, one layer: exchanges of 4. By hand, as the runtime's phases run a lone B: the combine's
  // gradient starts XB1 [0,4], waited for whole; the experts' input gradient [4,6] starts XB2 [6,10]; their W [6,7]
  // runs under it; the attention waits [7,10], then runs its input and parameter gradients [10,13]. 13 against
  // B + a2a = 14 when it waits for its exchanges whole, as with pair=threads or pair=off.
  const Action lone = Action::backward(0, 0);
  EXPECT_DOUBLE_EQ(CostModel::parse("F=4,B=6,W=2,a2a=8").duration(lone), 13);
  EXPECT_DOUBLE_EQ(CostModel::parse("F=4,B=6,W=2,a2a=8,pair=threads").duration(lone), 14);
  EXPECT_DOUBLE_EQ(CostModel::parse("F=4,B=6,W=2,a2a=8,pair=off").duration(lone), 14);
  // Latency 2 of each 4: the exchanges do not overlap, nothing changes.
  EXPECT_DOUBLE_EQ(CostModel::parse("F=4,B=6,W=2,a2a=8,a2a_latency=2").duration(lone), 13);
  // A W of 6 (I=0) covers XB2 whole: 4 + 0 + 3 (W under XB2's 4, then 1 waited) + 3.
  EXPECT_DOUBLE_EQ(CostModel::parse("F=4,B=6,W=6,a2a=8").duration(lone), 4 + 4 + 3);
  // An I action is not the phases': it waits for its exchanges whole.
  EXPECT_DOUBLE_EQ(CostModel::parse("F=4,B=6,W=2,a2a=8").duration(Action::backward_input(0, 0)), 12);
}

TEST(PhasedPair, TheLatencyCostKeyIsParsedPrintedAndChecked) {
  const CostModel c = CostModel::parse("F=4,B=6,W=2,a2a=8,a2a_latency=2");
  EXPECT_DOUBLE_EQ(c.overlapped_pair(), 13);  // AnExchangesLatencyIsNotShared's
  EXPECT_TRUE(test::contains(c.to_string(), ",a2a=8,a2a_latency=2")) << c.to_string();
  EXPECT_FALSE(test::contains(CostModel::parse("F=4,B=6,W=2,a2a=8").to_string(), "latency"));
  EXPECT_TRUE(test::contains(test::error_message([] { CostModel::parse("F=4,B=6,W=2,a2a=8,layers=2,a2a_latency=3"); }),
                             "0 <= a2a_latency <= a2a / (2 x layers) = 2, got a2a_latency=3"));
  EXPECT_TRUE(test::contains(test::error_message([] { CostModel::parse("a2a=8,a2a_latency=-1"); }), "a2a_latency"));
}

TEST(PhasedPair, TheLayersCostKeyIsParsedPrintedAndChecked) {
  const CostModel c = CostModel::parse("F=4,B=6,W=2,a2a=8,layers=2");
  EXPECT_EQ(c.layers, 2);
  EXPECT_TRUE(test::contains(c.to_string(), ",a2a=8,layers=2")) << c.to_string();
  EXPECT_DOUBLE_EQ(c.overlapped_pair(), time_phased_pair({4, 8, 2, 4, 2, 8, 2}).duration);
  for (const char* bad : {"layers=0", "layers=1.5", "layers=5000"})
    EXPECT_TRUE(test::contains(test::error_message([&] { CostModel::parse(bad); }), "layers")) << bad;
}

}  // namespace
}  // namespace dualpipe
