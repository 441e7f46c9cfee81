// The Zero Bubble paper's profiled settings and published bubble rates (Qi et al., "Zero Bubble Pipeline
// Parallelism", arXiv 2401.10241, the version with ZB-V: Table 9 "Profiled time of T_F, T_B, T_W and T_comm" and
// Table 5 "Bubble rates of 1F1B, 1F1B-I, ZB-H1, ZB-H2, ZB-1p, ZB-2p under different settings"), transcribed by
// hand. The paper's B is the input-gradient pass (our I) and W the weight-gradient pass, so our full backward is
// B = T_B + T_W. Its bubble rate is (cost - m(T_F + T_B + T_W)) / cost with cost the largest per-stage span: our
// span rate. Its memory limits are p M_B (1F1B's) for ZB-1p and 2p M_B for ZB-2p, with M_W / M_B = 32h / (34h + 5as)
// from its Table 1 and Table 3's model shapes.
#pragma once

#include <string>
#include <vector>

namespace dualpipe::test {

struct ZeroBubbleRow {
  const char* model;
  int p;          // stages (= ranks)
  int m;          // micro-batches
  double t_f, t_b, t_w, t_comm;
  double w_mem;   // M_W / M_B for the model
  double one_f_one_b, zb_h1, zb_h2, zb_1p, zb_2p;  // published bubble rates
};

// 32h / (34h + 5as): 1.5B h=2304 a=24, 6.2B h=4096 a=32, 14.6B h=5120 a=40, 28.3B h=6144 a=48, all s=1024.
inline double zero_bubble_w_mem(double h, double a, double s) { return 32 * h / (34 * h + 5 * a * s); }

inline std::vector<ZeroBubbleRow> zero_bubble_rows() {
  const double w15 = zero_bubble_w_mem(2304, 24, 1024), w62 = zero_bubble_w_mem(4096, 32, 1024);
  const double w146 = zero_bubble_w_mem(5120, 40, 1024), w283 = zero_bubble_w_mem(6144, 48, 1024);
  return {
      {"1.5B", 8, 24, 18.522, 18.086, 9.337, 0.601, w15, 0.2431, 0.1585, 0.1083, 0.1585, 0.0433},
      {"1.5B", 8, 32, 18.513, 18.086, 9.331, 0.626, w15, 0.1985, 0.1242, 0.0837, 0.1242, 0.0039},
      {"1.5B", 8, 64, 18.546, 18.097, 9.321, 0.762, w15, 0.1240, 0.0674, 0.0444, 0.0674, 0.0026},
      {"6.2B", 8, 24, 29.718, 29.444, 19.927, 0.527, w62, 0.2347, 0.1323, 0.0698, 0.1323, 0.0029},
      {"6.2B", 8, 32, 29.802, 29.428, 19.530, 0.577, w62, 0.1898, 0.1045, 0.0559, 0.1045, 0.0022},
      {"6.2B", 8, 64, 29.935, 29.621, 19.388, 0.535, w62, 0.1091, 0.0554, 0.0294, 0.0554, 0.0010},
      {"14.6B", 16, 48, 11.347, 11.248, 8.132, 0.377, w146, 0.2552, 0.1397, 0.0672, 0.1397, 0.0066},
      {"14.6B", 16, 64, 11.307, 11.254, 8.101, 0.379, w146, 0.2082, 0.1088, 0.0516, 0.1088, 0.0054},
      {"14.6B", 16, 128, 11.325, 11.308, 8.109, 0.378, w146, 0.1251, 0.0576, 0.0266, 0.0576, 0.0028},
      {"28.3B", 32, 96, 10.419, 10.207, 7.715, 0.408, w283, 0.2646, 0.1421, 0.0641, 0.1421, 0.0038},
      {"28.3B", 32, 128, 10.408, 10.204, 7.703, 0.408, w283, 0.2168, 0.1106, 0.0490, 0.1106, 0.0029},
      {"28.3B", 32, 256, 10.402, 10.248, 7.698, 0.460, w283, 0.1352, 0.0594, 0.0257, 0.0594, 0.0018},
  };
}

inline std::string describe(const ZeroBubbleRow& r) {
  return std::string(r.model) + " p=" + std::to_string(r.p) + " m=" + std::to_string(r.m);
}

}  // namespace dualpipe::test
