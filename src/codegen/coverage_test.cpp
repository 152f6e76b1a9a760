// Coverage sweep for llo-gen's first promise: every program the reference
// interpreter runs also compiles and matches it. Each case is one opcode
// template instantiated for every array element type; combinations the
// verifier or the interpreter reject are skipped, and every other one must
// compile, run on the simulator and agree with the interpreter.
#include <map>
#include <set>

#include "codegen/test_util.h"

namespace tpu::codegen {
namespace {

using hlo::ElementType;

// One opcode template: HLO text with {T} for the element type under test,
// {C} for its complex-component type (T itself when T is real) and {K} for
// the complex type whose component T is (c64 for f32, else T).
struct OpCase {
  const char* name;
  const char* text;
};

std::vector<ElementType> arrayTypes() {
  std::vector<ElementType> out;
  for (int i = 0; i < hlo::kElementTypeCount; ++i) {
    auto t = static_cast<ElementType>(i);
    if (hlo::isArrayElementType(t)) out.push_back(t);
  }
  return out;
}

std::string instantiate(const char* tmpl, ElementType t) {
  std::string T(hlo::elementTypeName(t));
  std::string C(hlo::elementTypeName(hlo::complexComponentType(t)));
  std::string K = t == ElementType::F32 ? "c64" : t == ElementType::F64 ? "c128" : T;
  std::string out;
  for (const char* p = tmpl; *p; ++p) {
    if (p[0] == '{' && p[1] && p[2] == '}') {
      if (p[1] == 'T') { out += T; p += 2; continue; }
      if (p[1] == 'C') { out += C; p += 2; continue; }
      if (p[1] == 'K') { out += K; p += 2; continue; }
    }
    out += *p;
  }
  return out;
}

#define UNARY(op) {op, "HloModule m\nENTRY main {\n  x = {T}[5,130] parameter(0)\n  ROOT r = {T}[5,130] " op "(x)\n}\n"}
#define BINARY(op)                                                                                        \
  {op, "HloModule m\nENTRY main {\n  x = {T}[5,130] parameter(0)\n  y = {T}[5,130] parameter(1)\n" \
       "  ROOT r = {T}[5,130] " op "(x, y)\n}\n"}
#define COMPARE(dir)                                                                                              \
  {"compare " dir, "HloModule m\nENTRY main {\n  x = {T}[5,130] parameter(0)\n  y = {T}[5,130] parameter(1)\n" \
                   "  ROOT r = pred[5,130] compare(x, y), direction=" dir "\n}\n"}

const std::vector<OpCase>& opCases() {
  static const std::vector<OpCase> cases = {
      UNARY("abs"), UNARY("negate"), UNARY("sign"), UNARY("not"), UNARY("popcnt"), UNARY("count-leading-zeros"),
      UNARY("exponential"), UNARY("exponential-minus-one"), UNARY("log"), UNARY("log-plus-one"), UNARY("logistic"),
      UNARY("sqrt"), UNARY("rsqrt"), UNARY("cbrt"), UNARY("sine"), UNARY("cosine"), UNARY("tan"), UNARY("tanh"),
      UNARY("sinh"), UNARY("cosh"), UNARY("asin"), UNARY("acos"), UNARY("atan"), UNARY("asinh"), UNARY("acosh"),
      UNARY("atanh"), UNARY("erf"), UNARY("floor"), UNARY("ceil"), UNARY("round-nearest-afz"),
      UNARY("round-nearest-even"), UNARY("copy"),
      BINARY("add"), BINARY("subtract"), BINARY("multiply"), BINARY("divide"), BINARY("remainder"),
      BINARY("maximum"), BINARY("minimum"), BINARY("power"), BINARY("atan2"), BINARY("and"), BINARY("or"),
      BINARY("xor"), BINARY("shift-left"), BINARY("shift-right-arithmetic"), BINARY("shift-right-logical"),
      BINARY("mulhi"),
      COMPARE("EQ"), COMPARE("NE"), COMPARE("LT"), COMPARE("LE"), COMPARE("GT"), COMPARE("GE"),
      {"is-finite", "HloModule m\nENTRY main {\n  x = {T}[5,130] parameter(0)\n"
                    "  ROOT r = pred[5,130] is-finite(x)\n}\n"},
      {"real", "HloModule m\nENTRY main {\n  x = {T}[5,130] parameter(0)\n  ROOT r = {C}[5,130] real(x)\n}\n"},
      {"imag", "HloModule m\nENTRY main {\n  x = {T}[5,130] parameter(0)\n  ROOT r = {C}[5,130] imag(x)\n}\n"},
      {"complex", "HloModule m\nENTRY main {\n  x = {T}[5,130] parameter(0)\n  y = {T}[5,130] parameter(1)\n"
                  "  ROOT r = {K}[5,130] complex(x, y)\n}\n"},
      {"select", "HloModule m\nENTRY main {\n  p = pred[5,130] parameter(0)\n  x = {T}[5,130] parameter(1)\n"
                 "  y = {T}[5,130] parameter(2)\n  ROOT r = {T}[5,130] select(p, x, y)\n}\n"},
      {"clamp", "HloModule m\nENTRY main {\n  lo = {T}[] parameter(0)\n  x = {T}[5,130] parameter(1)\n"
                "  hi = {T}[] parameter(2)\n  ROOT r = {T}[5,130] clamp(lo, x, hi)\n}\n"},
      {"reduce-precision", "HloModule m\nENTRY main {\n  x = {T}[5,130] parameter(0)\n"
                           "  ROOT r = {T}[5,130] reduce-precision(x), exponent_bits=5, mantissa_bits=7\n}\n"},
      {"broadcast", "HloModule m\nENTRY main {\n  x = {T}[130] parameter(0)\n"
                    "  ROOT r = {T}[3,5,130] broadcast(x), dimensions={2}\n}\n"},
      {"transpose", "HloModule m\nENTRY main {\n  x = {T}[5,130,3] parameter(0)\n"
                    "  ROOT r = {T}[3,130,5] transpose(x), dimensions={2,1,0}\n}\n"},
      {"reshape", "HloModule m\nENTRY main {\n  x = {T}[6,130] parameter(0)\n  ROOT r = {T}[3,260] reshape(x)\n}\n"},
      {"slice", "HloModule m\nENTRY main {\n  x = {T}[9,300] parameter(0)\n"
                "  ROOT r = {T}[4,97] slice(x), slice={[1:9:2], [3:294:3]}\n}\n"},
      {"pad", "HloModule m\nENTRY main {\n  x = {T}[5,130] parameter(0)\n  z = {T}[] parameter(1)\n"
              "  ROOT r = {T}[8,265] pad(x, z), padding=1_2x3_3_1\n}\n"},
      {"concatenate", "HloModule m\nENTRY main {\n  x = {T}[5,130] parameter(0)\n  y = {T}[5,7] parameter(1)\n"
                      "  ROOT r = {T}[5,137] concatenate(x, y), dimensions={1}\n}\n"},
      {"reverse", "HloModule m\nENTRY main {\n  x = {T}[5,130] parameter(0)\n"
                  "  ROOT r = {T}[5,130] reverse(x), dimensions={0,1}\n}\n"},
      {"iota", "HloModule m\nENTRY main {\n  ROOT r = {T}[5,130] iota(), iota_dimension=1\n}\n"},
      {"dynamic-slice", "HloModule m\nENTRY main {\n  x = {T}[9,300] parameter(0)\n  i = s32[] constant(2)\n"
                        "  j = s32[] constant(250)\n  ROOT r = {T}[4,97] dynamic-slice(x, i, j), "
                        "dynamic_slice_sizes={4,97}\n}\n"},
      {"dynamic-update-slice", "HloModule m\nENTRY main {\n  x = {T}[9,300] parameter(0)\n"
                               "  u = {T}[4,97] parameter(1)\n  i = s32[] constant(2)\n  j = s32[] constant(-5)\n"
                               "  ROOT r = {T}[9,300] dynamic-update-slice(x, u, i, j)\n}\n"},
      {"reduce", "HloModule m\nadd {\n  a = {T}[] parameter(0)\n  b = {T}[] parameter(1)\n"
                 "  ROOT s = {T}[] maximum(a, b)\n}\nENTRY main {\n  x = {T}[5,130] parameter(0)\n"
                 "  z = {T}[] parameter(1)\n  ROOT r = {T}[130] reduce(x, z), dimensions={0}, to_apply=add\n}\n"},
      {"reduce-add", "HloModule m\nadd {\n  a = {T}[] parameter(0)\n  b = {T}[] parameter(1)\n"
                     "  ROOT s = {T}[] add(a, b)\n}\nENTRY main {\n  x = {T}[5,130] parameter(0)\n"
                     "  z = {T}[] parameter(1)\n  ROOT r = {T}[5] reduce(x, z), dimensions={1}, to_apply=add\n}\n"},
      {"reduce-window", "HloModule m\nmx {\n  a = {T}[] parameter(0)\n  b = {T}[] parameter(1)\n"
                        "  ROOT s = {T}[] maximum(a, b)\n}\nENTRY main {\n  x = {T}[9,130] parameter(0)\n"
                        "  z = {T}[] parameter(1)\n  ROOT r = {T}[4,64] reduce-window(x, z), "
                        "window={size=3x4 stride=2x2}, to_apply=mx\n}\n"},
      {"select-and-scatter",
       "HloModule m\nge {\n  a = {T}[] parameter(0)\n  b = {T}[] parameter(1)\n"
       "  ROOT c = pred[] compare(a, b), direction=GE\n}\nadd {\n  a = {T}[] parameter(0)\n  b = {T}[] parameter(1)\n"
       "  ROOT s = {T}[] add(a, b)\n}\nENTRY main {\n  x = {T}[8,12] parameter(0)\n  s = {T}[4,6] parameter(1)\n"
       "  z = {T}[] parameter(2)\n  ROOT r = {T}[8,12] select-and-scatter(x, s, z), window={size=2x2 stride=2x2}, "
       "select=ge, scatter=add\n}\n"},
      {"dot", "HloModule m\nENTRY main {\n  x = {T}[2,9,40] parameter(0)\n  y = {T}[2,40,17] parameter(1)\n"
              "  ROOT r = {T}[2,9,17] dot(x, y), lhs_batch_dims={0}, lhs_contracting_dims={2}, rhs_batch_dims={0}, "
              "rhs_contracting_dims={1}\n}\n"},
      {"convolution", "HloModule m\nENTRY main {\n  x = {T}[2,9,9,3] parameter(0)\n  w = {T}[3,3,3,5] parameter(1)\n"
                      "  ROOT r = {T}[2,9,9,5] convolution(x, w), window={size=3x3 pad=1_1x1_1}, "
                      "dim_labels=b01f_01io->b01f\n}\n"},
      {"sort", "HloModule m\nlt {\n  a = {T}[] parameter(0)\n  b = {T}[] parameter(1)\n"
               "  ROOT c = pred[] compare(a, b), direction=LT\n}\nENTRY main {\n  x = {T}[5,130] parameter(0)\n"
               "  ROOT r = {T}[5,130] sort(x), dimensions={1}, to_apply=lt\n}\n"},
      {"sort-values", "HloModule m\nlt {\n  a = s32[] parameter(0)\n  b = s32[] parameter(1)\n"
                      "  c = {T}[] parameter(2)\n  d = {T}[] parameter(3)\n"
                      "  ROOT r = pred[] compare(a, b), direction=LT\n}\nENTRY main {\n  k = s32[5,130] parameter(0)\n"
                      "  v = {T}[5,130] parameter(1)\n  ROOT r = (s32[5,130], {T}[5,130]) sort(k, v), "
                      "dimensions={1}, is_stable=true, to_apply=lt\n}\n"},
      {"gather", "HloModule m\nENTRY main {\n  x = {T}[20,30] parameter(0)\n  i = s32[6,1] parameter(1)\n"
                 "  ROOT r = {T}[6,30] gather(x, i), offset_dims={1}, collapsed_slice_dims={0}, "
                 "start_index_map={0}, index_vector_dim=1, slice_sizes={1,30}\n}\n"},
      {"scatter", "HloModule m\nadd {\n  a = {T}[] parameter(0)\n  b = {T}[] parameter(1)\n"
                  "  ROOT s = {T}[] add(a, b)\n}\nENTRY main {\n  x = {T}[20,30] parameter(0)\n"
                  "  i = s32[6,1] parameter(1)\n  u = {T}[6,30] parameter(2)\n"
                  "  ROOT r = {T}[20,30] scatter(x, i, u), update_window_dims={1}, inserted_window_dims={0}, "
                  "scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=add\n}\n"},
      {"map", "HloModule m\nf {\n  a = {T}[] parameter(0)\n  b = {T}[] parameter(1)\n"
              "  ROOT s = {T}[] subtract(a, b)\n}\nENTRY main {\n  x = {T}[5,130] parameter(0)\n"
              "  y = {T}[5,130] parameter(1)\n  ROOT r = {T}[5,130] map(x, y), dimensions={0,1}, to_apply=f\n}\n"},
      {"while", "HloModule m\ncond {\n  p = (s32[], {T}[5,130]) parameter(0)\n  i = s32[] get-tuple-element(p), index=0\n"
                "  n = s32[] constant(3)\n  ROOT c = pred[] compare(i, n), direction=LT\n}\n"
                "body {\n  p = (s32[], {T}[5,130]) parameter(0)\n  i = s32[] get-tuple-element(p), index=0\n"
                "  x = {T}[5,130] get-tuple-element(p), index=1\n  one = s32[] constant(1)\n"
                "  j = s32[] add(i, one)\n  y = {T}[5,130] add(x, x)\n  ROOT t = (s32[], {T}[5,130]) tuple(j, y)\n}\n"
                "ENTRY main {\n  x = {T}[5,130] parameter(0)\n  z = s32[] constant(0)\n"
                "  t = (s32[], {T}[5,130]) tuple(z, x)\n  w = (s32[], {T}[5,130]) while(t), condition=cond, body=body\n"
                "  ROOT r = {T}[5,130] get-tuple-element(w), index=1\n}\n"},
      {"conditional", "HloModule m\nb0 {\n  x = {T}[5,130] parameter(0)\n  ROOT r = {T}[5,130] negate(x)\n}\n"
                      "b1 {\n  x = {T}[5,130] parameter(0)\n  ROOT r = {T}[5,130] abs(x)\n}\n"
                      "ENTRY main {\n  i = s32[] parameter(0)\n  x = {T}[5,130] parameter(1)\n"
                      "  ROOT r = {T}[5,130] conditional(i, x, x), branch_computations={b0, b1}\n}\n"},
      {"topk", "HloModule m\nENTRY main {\n  x = {T}[5,130] parameter(0)\n"
               "  ROOT r = ({T}[5,4], s32[5,4]) topk(x), k=4, largest=true\n}\n"},
      {"rng-uniform", "HloModule m\nENTRY main {\n  a = {T}[] constant(0)\n  b = {T}[] constant(4)\n"
                      "  ROOT r = {T}[5,130] rng(a, b), distribution=rng_uniform\n}\n"},
      {"rng-normal", "HloModule m\nENTRY main {\n  a = {T}[] constant(0)\n  b = {T}[] constant(1)\n"
                     "  ROOT r = {T}[5,130] rng(a, b), distribution=rng_normal\n}\n"},
      {"rng-bit-generator", "HloModule m\nENTRY main {\n  s = u64[2] parameter(0)\n"
                            "  ROOT r = (u64[2], {T}[5,130]) rng-bit-generator(s), algorithm=rng_three_fry\n}\n"},
      {"fft", "HloModule m\nENTRY main {\n  x = {T}[3,16] parameter(0)\n"
              "  ROOT r = {T}[3,16] fft(x), fft_type=FFT, fft_length={16}\n}\n"},
      {"batch-norm-inference",
       "HloModule m\nENTRY main {\n  x = {T}[2,4,3,8] parameter(0)\n  s = {T}[4] parameter(1)\n"
       "  o = {T}[4] parameter(2)\n  m = {T}[4] parameter(3)\n  v = {T}[4] parameter(4)\n"
       "  ROOT r = {T}[2,4,3,8] batch-norm-inference(x, s, o, m, v), epsilon=0.001, feature_index=1\n}\n"},
      {"batch-norm-training",
       "HloModule m\nENTRY main {\n  x = {T}[2,4,3,8] parameter(0)\n  s = {T}[4] parameter(1)\n"
       "  o = {T}[4] parameter(2)\n  ROOT r = ({T}[2,4,3,8], {T}[4], {T}[4]) batch-norm-training(x, s, o), "
       "epsilon=0.001, feature_index=1\n}\n"},
      {"batch-norm-grad",
       "HloModule m\nENTRY main {\n  x = {T}[2,4,3,8] parameter(0)\n  s = {T}[4] parameter(1)\n"
       "  m = {T}[4] parameter(2)\n  v = {T}[4] parameter(3)\n  g = {T}[2,4,3,8] parameter(4)\n"
       "  ROOT r = ({T}[2,4,3,8], {T}[4], {T}[4]) batch-norm-grad(x, s, m, v, g), epsilon=0.001, "
       "feature_index=1\n}\n"},
      {"domain", "HloModule m\nENTRY main {\n  x = {T}[5,130] parameter(0)\n  ROOT r = {T}[5,130] domain(x), "
                 "domain={kind=\"sharding\", entry={maximal device=0}, exit={replicated}}\n}\n"},
      {"opt-barrier", "HloModule m\nENTRY main {\n  x = {T}[5,130] parameter(0)\n  t = ({T}[5,130]) tuple(x)\n"
                      "  b = ({T}[5,130]) opt-barrier(t)\n  ROOT r = {T}[5,130] get-tuple-element(b), index=0\n}\n"},
      {"get-dimension-size", "HloModule m\nENTRY main {\n  x = {T}[5,130] parameter(0)\n"
                             "  ROOT r = s32[] get-dimension-size(x), dimensions={1}\n}\n"},
      {"set-dimension-size", "HloModule m\nENTRY main {\n  x = {T}[5,130] parameter(0)\n  n = s32[] constant(3)\n"
                             "  ROOT r = {T}[<=5,130] set-dimension-size(x, n), dimensions={0}\n}\n"},
      {"compare-totalorder", "HloModule m\nENTRY main {\n  x = {T}[5,130] parameter(0)\n  y = {T}[5,130] parameter(1)\n"
                             "  ROOT r = pred[5,130] compare(x, y), direction=LT, type=TOTALORDER\n}\n"},
      {"constant", "HloModule m\nENTRY main {\n  c = {T}[2,3] constant({{0, 1, 0}, {1, 1, 0}})\n"
                   "  x = {T}[2,3] parameter(0)\n  ROOT r = {T}[2,3] maximum(c, x)\n}\n"},
      {"dynamic-slice-index", "HloModule m\nENTRY main {\n  x = f32[9,300] parameter(0)\n  i = {T}[] parameter(1)\n"
                              "  j = {T}[] parameter(2)\n  ROOT r = f32[4,97] dynamic-slice(x, i, j), "
                              "dynamic_slice_sizes={4,97}\n}\n"},
      {"gather-index", "HloModule m\nENTRY main {\n  x = f32[20,30] parameter(0)\n  i = {T}[6,1] parameter(1)\n"
                       "  ROOT r = f32[6,30] gather(x, i), offset_dims={1}, collapsed_slice_dims={0}, "
                       "start_index_map={0}, index_vector_dim=1, slice_sizes={1,30}\n}\n"},
      {"reduce-argmax",
       "HloModule m\nam {\n  a = {T}[] parameter(0)\n  i = s32[] parameter(1)\n  b = {T}[] parameter(2)\n"
       "  j = s32[] parameter(3)\n  gt = pred[] compare(a, b), direction=GT\n  eq = pred[] compare(a, b), direction=EQ\n"
       "  lt = pred[] compare(i, j), direction=LT\n  tie = pred[] and(eq, lt)\n  g = pred[] or(gt, tie)\n"
       "  v = {T}[] select(g, a, b)\n  k = s32[] select(g, i, j)\n  ROOT t = ({T}[], s32[]) tuple(v, k)\n}\n"
       "ENTRY main {\n"
       "  x = {T}[5,130] parameter(0)\n  n = s32[5,130] iota(), iota_dimension=1\n  z = {T}[] parameter(1)\n"
       "  m = s32[] constant(0)\n  ROOT r = ({T}[5], s32[5]) reduce(x, n, z, m), dimensions={1}, to_apply=am\n}\n"},
      {"reduce-window-padded",
       "HloModule m\nadd {\n  a = {T}[] parameter(0)\n  b = {T}[] parameter(1)\n  ROOT s = {T}[] add(a, b)\n}\n"
       "ENTRY main {\n  x = {T}[9,20] parameter(0)\n  z = {T}[] parameter(1)\n"
       "  ROOT r = {T}[5,20] reduce-window(x, z), window={size=2x3 stride=2x1 pad=1_1x1_1}, to_apply=add\n}\n"},
      {"pad-negative", "HloModule m\nENTRY main {\n  x = {T}[5,130] parameter(0)\n  z = {T}[] parameter(1)\n"
                       "  ROOT r = {T}[13,126] pad(x, z), padding=0_0_2x-3_-1\n}\n"},
      {"call", "HloModule m\nf {\n  a = {T}[5,130] parameter(0)\n  ROOT n = {T}[5,130] negate(a)\n}\n"
               "ENTRY main {\n  x = {T}[5,130] parameter(0)\n  ROOT r = {T}[5,130] call(x), to_apply=f\n}\n"},
      {"conditional-pred",
       "HloModule m\nt {\n  x = {T}[5,130] parameter(0)\n  ROOT r = {T}[5,130] copy(x)\n}\n"
       "f {\n  x = {T}[5,130] parameter(0)\n  ROOT r = {T}[5,130] negate(x)\n}\n"
       "ENTRY main {\n  p = pred[] parameter(0)\n  x = {T}[5,130] parameter(1)\n"
       "  ROOT r = {T}[5,130] conditional(p, x, x), true_computation=t, false_computation=f\n}\n"},
      {"rng-bit-generator-philox", "HloModule m\nENTRY main {\n  s = u64[3] parameter(0)\n"
                                   "  ROOT r = (u64[3], {T}[5,130]) rng-bit-generator(s), algorithm=rng_philox\n}\n"},
      {"clamp-arrays", "HloModule m\nENTRY main {\n  lo = {T}[5,130] parameter(0)\n  x = {T}[5,130] parameter(1)\n"
                       "  hi = {T}[5,130] parameter(2)\n  ROOT r = {T}[5,130] clamp(lo, x, hi)\n}\n"},
      {"custom-call-sharding", "HloModule m\nENTRY main {\n  x = {T}[5,130] parameter(0)\n"
                               "  ROOT r = {T}[5,130] custom-call(x), custom_call_target=\"Sharding\"\n}\n"},
      {"custom-call-full-to-shard", "HloModule m\nENTRY main {\n  x = {T}[6,130] parameter(0)\n"
                                    "  ROOT r = {T}[3,130] custom-call(x), custom_call_target=\"SPMDFullToShardShape\"\n}\n"},
      {"custom-call-shard-to-full", "HloModule m\nENTRY main {\n  x = {T}[3,130] parameter(0)\n"
                                    "  ROOT r = {T}[6,130] custom-call(x), custom_call_target=\"SPMDShardToFullShape\"\n}\n"},
      {"custom-call-gelu", "HloModule m\nENTRY main {\n  x = {T}[5,130] parameter(0)\n"
                           "  ROOT r = {T}[5,130] custom-call(x), custom_call_target=\"AwsNeuronGelu\"\n}\n"},
      {"custom-call-gelu-backward", "HloModule m\nENTRY main {\n  x = {T}[5,130] parameter(0)\n"
                                    "  ROOT r = {T}[5,130] custom-call(x), custom_call_target=\"AwsNeuronGeluBackward\"\n}\n"},
      {"custom-call-gemm",
       "HloModule m\nENTRY main {\n  a = {T}[2,9,40] parameter(0)\n  b = {T}[2,17,40] parameter(1)\n"
       "  c = {T}[2,9,17] parameter(2)\n  ROOT g = {T}[2,9,17] custom-call(a, b, c), custom_call_target=\"__cublas$gemm\", "
       "backend_config={\"gemm_backend_config\":{\"alpha_real\":2,\"beta\":0.5,\"dot_dimension_numbers\":"
       "{\"lhs_contracting_dimensions\":[\"2\"],\"rhs_contracting_dimensions\":[\"2\"],"
       "\"lhs_batch_dimensions\":[\"0\"],\"rhs_batch_dimensions\":[\"0\"]}}}\n}\n"},
      {"convert-to-f32", "HloModule m\nENTRY main {\n  x = {T}[5,130] parameter(0)\n"
                         "  ROOT r = f32[5,130] convert(x)\n}\n"},
      {"convert-to-s32", "HloModule m\nENTRY main {\n  x = {T}[5,130] parameter(0)\n"
                         "  ROOT r = s32[5,130] convert(x)\n}\n"},
      {"convert-from-f32", "HloModule m\nENTRY main {\n  x = f32[5,130] parameter(0)\n"
                           "  s = f32[5,130] multiply(x, x)\n  y = f32[5,130] add(x, s)\n"
                           "  ROOT r = {T}[5,130] convert(y)\n}\n"},
      {"convert-from-s32", "HloModule m\nENTRY main {\n  x = s32[5,130] parameter(0)\n"
                           "  ROOT r = {T}[5,130] convert(x)\n}\n"},
      {"custom-call-topk", "HloModule m\nENTRY main {\n  x = {T}[5,130] parameter(0)\n"
                           "  ROOT r = ({T}[5,4], s32[5,4]) custom-call(x), custom_call_target=\"TopK\"\n}\n"},
      {"topk-smallest", "HloModule m\nENTRY main {\n  x = {T}[3,5,130] parameter(0)\n"
                        "  ROOT r = ({T}[3,5,130], s32[3,5,130]) topk(x), k=130, largest=false\n}\n"},
      // Bounded dynamic dimensions are held at their bounds (as the
      // interpreter holds them) through elementwise ops, reductions and
      // dynamic-reshape; get-dimension-size then reads the bound.
      {"dynamic-elementwise", "HloModule m\nENTRY main {\n  x = {T}[5,130] parameter(0)\n  n = s32[] constant(3)\n"
                              "  d = {T}[<=5,130] set-dimension-size(x, n), dimensions={0}\n"
                              "  ROOT r = {T}[<=5,130] maximum(d, d)\n}\n"},
      {"dynamic-reduce", "HloModule m\nmx {\n  a = {T}[] parameter(0)\n  b = {T}[] parameter(1)\n"
                         "  ROOT s = {T}[] maximum(a, b)\n}\nENTRY main {\n  x = {T}[5,130] parameter(0)\n"
                         "  z = {T}[] parameter(1)\n  n = s32[] constant(3)\n"
                         "  d = {T}[<=5,130] set-dimension-size(x, n), dimensions={0}\n"
                         "  ROOT r = {T}[<=5] reduce(d, z), dimensions={1}, to_apply=mx\n}\n"},
      {"dynamic-reshape", "HloModule m\nENTRY main {\n  x = {T}[6,130] parameter(0)\n  a = s32[] constant(2)\n"
                          "  b = s32[] constant(260)\n  ROOT r = {T}[<=3,260] dynamic-reshape(x, a, b)\n}\n"},
      {"get-dimension-size-dynamic", "HloModule m\nENTRY main {\n  x = {T}[5,130] parameter(0)\n"
                                     "  n = s32[] constant(3)\n"
                                     "  d = {T}[<=5,130] set-dimension-size(x, n), dimensions={0}\n"
                                     "  ROOT r = s32[] get-dimension-size(d), dimensions={0}\n}\n"},
      // Variadic reduce past the 3 operands the segment kernel takes: an
      // arg-max carrying three more values.
      {"reduce-variadic-4",
       "HloModule m\nf {\n  a0 = {T}[] parameter(0)\n  a1 = {T}[] parameter(1)\n  a2 = {T}[] parameter(2)\n"
       "  a3 = {T}[] parameter(3)\n  b0 = {T}[] parameter(4)\n  b1 = {T}[] parameter(5)\n  b2 = {T}[] parameter(6)\n"
       "  b3 = {T}[] parameter(7)\n  p = pred[] compare(a0, b0), direction=GE\n  r0 = {T}[] select(p, a0, b0)\n"
       "  r1 = {T}[] select(p, a1, b1)\n  r2 = {T}[] select(p, a2, b2)\n  r3 = {T}[] select(p, a3, b3)\n"
       "  ROOT t = ({T}[], {T}[], {T}[], {T}[]) tuple(r0, r1, r2, r3)\n}\nENTRY main {\n"
       "  x0 = {T}[5,130] parameter(0)\n  x1 = {T}[5,130] parameter(1)\n  x2 = {T}[5,130] parameter(2)\n"
       "  x3 = {T}[5,130] parameter(3)\n  z = {T}[] parameter(4)\n"
       "  ROOT r = ({T}[5], {T}[5], {T}[5], {T}[5]) reduce(x0, x1, x2, x3, z, z, z, z), dimensions={1}, "
       "to_apply=f\n}\n"},
  };
  return cases;
}

// Ops whose results must equal the interpreter's bit for bit on every
// type: they only move or select elements, or (batch norm) compute in the
// interpreter's f64 order.
bool bitExact(std::string_view op) {
  return op.starts_with("batch-norm") || op.starts_with("topk") || op == "custom-call-topk" ||
         op.starts_with("dynamic-") || op.starts_with("get-dimension-size") || op == "set-dimension-size" ||
         op == "domain" || op == "reduce-variadic-4" || op == "rng-bit-generator";
}

// Relative error |a-b|/(1+|b|) allowed for a float result of `t` (ops whose
// compiled math differs from the interpreter's libm by a few ulps). Dots and
// convolutions run with six bf16 passes, so f32 is close to exact; f16
// operands are rounded to bf16 on the MXU.
double tolerance(std::string_view op, ElementType t) {
  if (bitExact(op)) return 0.0;
  bool matrix = op == "dot" || op == "convolution";
  // The interpreter rounds each partial sum of a narrow-float reduction to
  // the narrow type; the compiled code accumulates in f32, as XLA does on
  // TPUs. Exactness of both is pinned elsewhere (ReducesOfNarrowTypes);
  // here the case must compile and run.
  if (op == "reduce-add" && hlo::isFloatType(t) && hlo::elementTypeInfo(t).bitWidth < 32) return 1e30;
  switch (t) {
    case ElementType::F64: case ElementType::C128: return 1e-12;
    case ElementType::F32: case ElementType::C64: return matrix ? 1e-5 : 1e-6;
    case ElementType::F16: return matrix ? 2e-2 : 2e-3;
    case ElementType::BF16: return 1e-2;
    default: return hlo::isFloatType(t) ? 0.26 : 0.0;
  }
}

// Inputs: uniform in (-1, 1) for floats (in (0, 2) for f8e8m0fnu, which has
// no sign, so that sorts see no NaN), small integers otherwise.
hlo::Literal sweepInput(const hlo::Shape& s, std::mt19937& rng) {
  if (!s.isArray() || s.elementType() != ElementType::F8E8M0FNU) return randomLiteral(s, rng);
  hlo::Literal l(s);
  std::uniform_real_distribution<double> positive(0.1, 4.0);
  for (int64_t k = 0; k < l.elementCount(); ++k) l.setDouble(k, positive(rng));
  return l;
}

// Cases llo-gen still refuses with an error. An op name with the element
// types it refuses ("*" names every op). Each must still fail to compile
// (so a fix has to remove its line) and nothing else may fail.
const std::map<std::string, std::set<std::string>>& knownGaps() {
  static const std::map<std::string, std::set<std::string>> gaps = {
  };
  return gaps;
}

bool isKnownGap(const std::string& op, ElementType t) {
  std::string name(hlo::elementTypeName(t));
  auto matches = [&](const std::set<std::string>& types) {
    for (const std::string& p : types)
      if (p == "*" || p == name || (p.back() == '*' && name.starts_with(p.substr(0, p.size() - 1)))) return true;
    return false;
  };
  const auto& gaps = knownGaps();
  auto all = gaps.find("*");
  if (all != gaps.end() && matches(all->second)) return true;
  auto it = gaps.find(op);
  return it != gaps.end() && matches(it->second);
}

// Whether the verifier and the interpreter accept `text`: only those
// programs must compile.
bool interpreterRuns(const std::string& text) {
  DiagnosticEngine diags;
  diags.setConsumer([](const Diagnostic&) {});
  auto source = std::make_shared<SourceFile>("case.hlo", text);
  auto loaded = hlo::readModule(source, diags);
  if (!loaded.module) return false;
  std::mt19937 rng(1234);
  std::vector<hlo::Literal> args;
  const hlo::Computation& entry = *loaded.module->entry();
  for (int64_t p = 0; p < entry.parameterCount(); ++p) args.push_back(sweepInput(entry.parameter(p)->shape(), rng));
  return eval::evaluate(*loaded.module, args, {}, diags).has_value();
}

// The compiled results for the sweep's seeded inputs, against the
// interpreter's.
E2eRun runCase(const std::string& text) {
  CodegenOptions options;
  options.f32DotPrecision = F32DotPrecision::Highest;
  std::mt19937 rng(1234);
  std::vector<hlo::Literal> args;
  {
    DiagnosticEngine diags;
    auto loaded = hlo::readModule(std::make_shared<SourceFile>("case.hlo", text), diags);
    const hlo::Computation& entry = *loaded.module->entry();
    for (int64_t p = 0; p < entry.parameterCount(); ++p) args.push_back(sweepInput(entry.parameter(p)->shape(), rng));
  }
  return compileAndCompare(text, "v5e", options, &args);
}

// A sweep's verdict on one compiled case: the failure to record, or empty
// when it passes (no error, within `tol`, and bit for bit when `exact`).
std::string verdict(const E2eRun& r, const std::string& label, double tol, bool exact) {
  if (!r.error.empty()) return fmt::format("{}: {}", label, r.error.substr(0, r.error.find('\n')));
  if (r.maxErr > tol) return fmt::format("{}: error {} > {} at {}", label, r.maxErr, tol, r.where);
  if (exact && r.bitMismatches != 0)
    return fmt::format("{}: {} elements differ in their bits, first {}", label, r.bitMismatches, r.bitWhere);
  return "";
}

// Integer and pred results must be the interpreter's bytes (a 4-bit value
// stored sign- or zero-extended as XLA does).
bool exactType(ElementType t) { return !hlo::isFloatType(t) && !hlo::isComplexType(t); }

std::string joined(const std::vector<std::string>& failures) {
  std::string all;
  for (const auto& f : failures) all += f + "\n";
  return all;
}

TEST(Coverage, EveryInterpretedOpcodeAndTypeCompiles) {
  std::vector<std::string> failures;
  int passed = 0, refused = 0, skipped = 0;
  for (const OpCase& c : opCases()) {
    bool ran = false;
    for (ElementType t : arrayTypes()) {
      std::string text = instantiate(c.text, t);
      if (!interpreterRuns(text)) {
        ++skipped;
        continue;
      }
      ran = true;
      E2eRun r = runCase(text);
      std::string label = fmt::format("{} on {}", c.name, hlo::elementTypeName(t));
      bool gap = isKnownGap(c.name, t);
      // A known gap must be refused by llo-gen itself, with a message.
      if (gap && r.error.starts_with("llo-gen: ") && r.error.find("error: ") != std::string::npos) {
        ++refused;
        continue;
      }
      if (gap && r.error.empty()) {
        failures.push_back(fmt::format("{}: compiles now; remove it from knownGaps()", label));
        continue;
      }
      // Ops exact by construction must give the interpreter's bytes too.
      std::string f = verdict(r, label, tolerance(c.name, t), exactType(t) || bitExact(c.name));
      if (f.empty()) ++passed;
      else failures.push_back(f);
    }
    // A template no type instantiates validly tests nothing.
    if (!ran) failures.push_back(fmt::format("{}: the interpreter runs it on no type", c.name));
  }
  RecordProperty("passed", passed);
  RecordProperty("refused", refused);
  RecordProperty("skipped", skipped);
  EXPECT_TRUE(failures.empty()) << failures.size() << " cases fail (" << passed << " pass, " << refused
                                << " known gaps refused, " << skipped << " not run by the interpreter):\n"
                                << joined(failures);
  // Keeps the sweep honest: most combinations must actually run.
  EXPECT_GT(passed, 1400);
}

// The templates written on [5,130] again on scalars, empty arrays, unit
// dimensions and higher ranks, for a few types of each kind.
TEST(Coverage, EveryInterpretedOpcodeOnEdgeShapes) {
  std::vector<std::string> failures;
  int passed = 0;
  const ElementType types[] = {ElementType::F32, ElementType::BF16, ElementType::S32, ElementType::U8,
                               ElementType::Pred, ElementType::S64, ElementType::F64, ElementType::C64};
  const char* shapes[] = {"[]", "[0,130]", "[5,0]", "[1,1,1]", "[2,3,4,5,3]", "[2053]"};
  for (const OpCase& c : opCases()) {
    std::string tmpl = c.text;
    if (tmpl.find("[5,130]") == std::string::npos) continue;
    for (const char* shape : shapes) {
      std::string text = tmpl;
      for (size_t at; (at = text.find("[5,130]")) != std::string::npos;) text.replace(at, 7, shape);
      for (ElementType t : types) {
        std::string inst = instantiate(text.c_str(), t);
        if (isKnownGap(c.name, t) || !interpreterRuns(inst)) continue;
        E2eRun r = runCase(inst);
        std::string label = fmt::format("{} on {}{}", c.name, hlo::elementTypeName(t), shape);
        std::string f = verdict(r, label, tolerance(c.name, t), false);
        if (f.empty()) ++passed;
        else failures.push_back(f);
      }
    }
  }
  RecordProperty("passed", passed);
  EXPECT_TRUE(failures.empty()) << failures.size() << " cases fail (" << passed << " pass):\n" << joined(failures);
  EXPECT_GT(passed, 1000);
}

// Every [5,130] template again on [300,1030] arrays, plus larger matrix,
// window, gather and scatter programs, for a chip with 256 KiB of VMEM: every
// kernel must tile its working set to fit.
TEST(Coverage, KernelsTileToFitASmallVmem) {
  const std::string target = std::string(TPU_SOURCE_DIR) + "/testdata/targets/v5e-small-vmem.json";
  std::vector<std::string> programs;
  for (const OpCase& c : opCases()) {
    std::string text = c.text;
    if (text.find("[5,130]") == std::string::npos) continue;
    for (size_t at; (at = text.find("[5,130]")) != std::string::npos;) text.replace(at, 7, "[300,1030]");
    for (ElementType t : {ElementType::F32, ElementType::BF16, ElementType::S32})
      if (!isKnownGap(c.name, t)) programs.push_back(instantiate(text.c_str(), t));
  }
  programs.push_back(R"(HloModule m
ENTRY main {
  x = f32[3,300,700] parameter(0)
  y = f32[3,700,500] parameter(1)
  ROOT r = f32[3,300,500] dot(x, y), lhs_batch_dims={0}, lhs_contracting_dims={2}, rhs_batch_dims={0}, rhs_contracting_dims={1}
})");
  programs.push_back(R"(HloModule m
ENTRY main {
  x = bf16[4,40,40,64] parameter(0)
  w = bf16[3,3,64,96] parameter(1)
  ROOT r = bf16[4,40,40,96] convolution(x, w), window={size=3x3 pad=1_1x1_1}, dim_labels=b01f_01io->b01f
})");
  programs.push_back(R"(HloModule m
mx {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] maximum(a, b)
}
ENTRY main {
  x = f32[8,200,200,16] parameter(0)
  z = f32[] constant(-inf)
  ROOT r = f32[8,100,100,16] reduce-window(x, z), window={size=1x3x3x1 stride=1x2x2x1 pad=0_0x1_1x1_1x0_0}, to_apply=mx
})");
  programs.push_back(R"(HloModule m
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
ENTRY main {
  x = f32[2000,300] parameter(0)
  i = s32[900,1] parameter(1)
  u = f32[900,300] parameter(2)
  g = f32[900,300] gather(x, i), offset_dims={1}, collapsed_slice_dims={0}, start_index_map={0}, index_vector_dim=1, slice_sizes={1,300}
  v = f32[900,300] add(g, u)
  ROOT r = f32[2000,300] scatter(x, i, v), update_window_dims={1}, inserted_window_dims={0}, scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=add
})");
  // Sort rows and a scatter window bigger than VMEM: external sort, window pieces.
  programs.push_back(R"(HloModule m
lt {
  a = s32[] parameter(0)
  b = s32[] parameter(1)
  c = f32[] parameter(2)
  d = f32[] parameter(3)
  ROOT r = pred[] compare(a, b), direction=LT
}
ENTRY main {
  k = s32[2,9000] parameter(0)
  v = f32[2,9000] parameter(1)
  ROOT r = (s32[2,9000], f32[2,9000]) sort(k, v), dimensions={1}, is_stable=true, to_apply=lt
})");
  programs.push_back(R"(HloModule m
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
ENTRY main {
  x = f32[50,3100] parameter(0)
  i = s32[4,2] parameter(1)
  u = f32[4,40,3000] parameter(2)
  ROOT r = f32[50,3100] scatter(x, i, u), update_window_dims={1,2}, inserted_window_dims={}, scatter_dims_to_operand_dims={0,1}, index_vector_dim=1, to_apply=add
})");
  std::vector<std::string> failures;
  int passed = 0;
  for (const std::string& text : programs) {
    if (!interpreterRuns(text)) continue;
    std::mt19937 rng(1234);
    std::vector<hlo::Literal> args;
    {
      DiagnosticEngine diags;
      auto loaded = hlo::readModule(std::make_shared<SourceFile>("case.hlo", text), diags);
      const hlo::Computation& entry = *loaded.module->entry();
      for (int64_t p = 0; p < entry.parameterCount(); ++p) args.push_back(sweepInput(entry.parameter(p)->shape(), rng));
      // Gather/scatter indices inside the operand, so that they matter.
      if (entry.parameterCount() == 3 && text.find("gather") != std::string::npos)
        for (int64_t k = 0; k < args[1].elementCount(); ++k) args[1].setInt(k, (k * 7919) % 2000);
    }
    CodegenOptions options;
    options.f32DotPrecision = F32DotPrecision::Highest;
    E2eRun r = compileAndCompare(text, target, options, &args);
    std::string label = text.substr(text.rfind("ROOT"), 60);
    ElementType t = text.find("bf16") != std::string::npos ? ElementType::BF16
                    : text.find("s32[300") != std::string::npos ? ElementType::S32 : ElementType::F32;
    std::string f = verdict(r, label, t == ElementType::S32 ? 0.0 : std::max(tolerance("dot", t), 1e-4), false);
    if (f.empty()) ++passed;
    else failures.push_back(f);
  }
  RecordProperty("passed", passed);
  EXPECT_TRUE(failures.empty()) << failures.size() << " programs fail (" << passed << " pass):\n" << joined(failures);
  EXPECT_GT(passed, 90);
}

// Reductions whose rows do not fit VMEM stream each row through it in
// segments; the fold visits the same vregs in the same order, so the
// results are the bits a chip with room for whole rows computes.
TEST(Coverage, LongReductionRowsStreamThroughVmem) {
  const std::string text = R"(HloModule m
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
argmax {
  a = s32[] parameter(0)
  i = s32[] parameter(1)
  b = s32[] parameter(2)
  j = s32[] parameter(3)
  gt = pred[] compare(a, b), direction=GT
  eq = pred[] compare(a, b), direction=EQ
  lt = pred[] compare(i, j), direction=LT
  tie = pred[] and(eq, lt)
  g = pred[] or(gt, tie)
  v = s32[] select(g, a, b)
  k = s32[] select(g, i, j)
  ROOT t = (s32[], s32[]) tuple(v, k)
}
ENTRY main {
  x = f32[3,100001] parameter(0)
  y = s32[300007] parameter(1)
  n = s32[300007] iota(), iota_dimension=0
  z = f32[] constant(0)
  m = s32[] constant(-2147483648)
  zi = s32[] constant(0)
  r = f32[3] reduce(x, z), dimensions={1}, to_apply=add
  q = (s32[], s32[]) reduce(y, n, m, zi), dimensions={0}, to_apply=argmax
  q0 = s32[] get-tuple-element(q), index=0
  q1 = s32[] get-tuple-element(q), index=1
  ROOT t = (f32[3], s32[], s32[]) tuple(r, q0, q1)
})";
  std::mt19937 rng(5);
  std::vector<hlo::Literal> args;
  auto make = [&](size_t i, const hlo::Shape& s) {
    if (i >= args.size()) args.push_back(randomLiteral(s, rng));
    return args[i];
  };
  PipelineRun small = runPipeline(text, make, std::string(TPU_SOURCE_DIR) + "/testdata/targets/v5e-small-vmem.json");
  ASSERT_EQ(small.error, "");
  PipelineRun roomy = runPipeline(text, make, "v5e");
  ASSERT_EQ(roomy.error, "");
  EXPECT_TRUE(small.got == roomy.got) << "segmented rows changed the result";
  const std::vector<const hlo::Literal*> want = small.want();
  ASSERT_EQ(want.size(), 3u);
  for (size_t r = 1; r < 3; ++r)
    EXPECT_TRUE(std::string(reinterpret_cast<const char*>(want[r]->data().data()), want[r]->data().size()) ==
                small.got[r])
        << "integer result " << r;
  hlo::Literal got(want[0]->shape());
  std::memcpy(got.mutableData().data(), small.got[0].data(), small.got[0].size());
  for (int64_t k = 0; k < 3; ++k) EXPECT_NEAR(got.getDouble(k), want[0]->getDouble(k), 1e-3);
}

// convert and bitcast-convert between every pair of element types.
// A template's entry as the body of a fusion whose other instructions make
// the op's array operands and result intermediates: each parameter and the
// root are reversed (a kernel of its own; the interpreter runs the same
// program, so it stays the oracle). Unless sink-views turns the whole into
// one streaming kernel (elementwise ops), the fusion is one VMEM-resident
// kernel (kernels/resident.cpp) and the op's kernel reads and writes VMEM
// instead of HBM. Empty when the template has tuple-shaped parameters or
// root.
std::string asResidentFusion(const std::string& text) {
  size_t entryAt = text.find("ENTRY main {\n");
  if (entryAt == std::string::npos) return "";
  std::string body, params, args;
  auto reversed = [](const std::string& name, const std::string& shape, const std::string& from) {
    size_t open = shape.find('['), close = shape.find(']');
    std::string dims;
    if (close > open + 1)
      for (size_t d = 0, n = static_cast<size_t>(std::count(shape.begin() + static_cast<std::ptrdiff_t>(open),
                                                             shape.begin() + static_cast<std::ptrdiff_t>(close), ',')) +
                              1;
           d < n; ++d)
        dims += (d ? "," : "") + std::to_string(d);
    return fmt::format("  {} = {} reverse({}), dimensions={{{}}}\n", name, shape, from, dims);
  };
  std::string rest = text.substr(entryAt + 13);
  for (size_t at = 0; at < rest.size();) {
    size_t end = rest.find('\n', at);
    std::string line = rest.substr(at, end - at);
    at = end + 1;
    if (line == "}") break;
    bool root = line.starts_with("  ROOT ");
    std::string l = root ? "  " + line.substr(7) : line;
    size_t eq = l.find(" = ");
    if (eq == std::string::npos || l.size() < 3) return "";
    std::string name = l.substr(2, eq - 2), after = l.substr(eq + 3);
    std::string shape = after.substr(0, after.find(' '));
    if (shape.starts_with("(")) return "";
    if (after.find(" parameter(") != std::string::npos) {
      std::string index = after.substr(after.find('(') + 1);
      params += l + "\n";
      args += (args.empty() ? "" : ", ") + name;
      body += fmt::format("  {}.p = {} parameter({}\n", name, shape, index);
      body += reversed(name, shape, name + ".p");
    } else if (root) {
      body += fmt::format("  {}.op = {}\n", name, after);
      std::string r = reversed(name + ".r", shape, name + ".op");
      body += r.substr(0, r.rfind("  ")) + "  ROOT " + r.substr(r.rfind("  ") + 2);
      return text.substr(0, entryAt) + "fused {\n" + body + "}\n\nENTRY main {\n" + params + "  ROOT f = " + shape +
             " fusion(" + args + "), kind=kLoop, calls=fused\n}\n";
    } else {
      body += l + "\n";
    }
  }
  return "";
}

// Every template again inside a fusion, for a few types of each kind: the
// fusion must be one kernel, and where it is a resident one, each op's
// kernel (its DMAs v2v, its scalar staging v2s) must still match the
// interpreter with its operands and result in VMEM.
TEST(Coverage, EveryOpcodeAsASectionOfAResidentFusion) {
  std::vector<std::string> failures;
  int passed = 0, resident = 0;
  const ElementType types[] = {ElementType::F32, ElementType::BF16, ElementType::S32, ElementType::U8,
                               ElementType::Pred, ElementType::S64, ElementType::C64, ElementType::S4};
  for (const OpCase& c : opCases()) {
    for (ElementType t : types) {
      std::string text = asResidentFusion(instantiate(c.text, t));
      if (text.empty() || isKnownGap(c.name, t) || !interpreterRuns(text)) continue;
      std::string label = fmt::format("{} on {}", c.name, hlo::elementTypeName(t));
      E2eRun r = runCase(text);
      std::string f = verdict(r, label, tolerance(c.name, t), exactType(t));
      if (f.empty()) ++passed;
      else failures.push_back(f);
      // Fusions with control flow keep their buffers in HBM by design.
      bool controlFlow = text.find(" call(") != std::string::npos || text.find(" conditional(") != std::string::npos ||
                         text.find(" while(") != std::string::npos;
      bool isResident = r.llo.find("intermediates in VMEM") != std::string::npos;
      if (r.error.empty() && !controlFlow && r.kernels != 1)
        failures.push_back(fmt::format("{}: {} kernels, not one", label, r.kernels));
      resident += isResident;
    }
  }
  RecordProperty("passed", passed);
  RecordProperty("resident", resident);
  EXPECT_TRUE(failures.empty()) << failures.size() << " cases fail (" << passed << " pass):\n" << joined(failures);
  EXPECT_GT(passed, 600);
  EXPECT_GT(resident, 250);
}

TEST(Coverage, EveryInterpretedConversionCompiles) {
  std::vector<std::string> failures;
  int passed = 0, refused = 0;
  for (ElementType from : arrayTypes()) {
    for (ElementType to : arrayTypes()) {
      std::string f(hlo::elementTypeName(from)), t(hlo::elementTypeName(to));
      int fb = hlo::elementTypeInfo(from).bitWidth, tb = hlo::elementTypeInfo(to).bitWidth;
      std::string inDims = "[5,130]", outDims = "[5,130]";
      if (fb > tb && tb > 0 && fb % tb == 0) outDims = fmt::format("[5,130,{}]", fb / tb);
      if (tb > fb && fb > 0 && tb % fb == 0) inDims = fmt::format("[5,130,{}]", tb / fb);
      std::vector<std::pair<std::string, std::string>> cases = {
          {"convert", fmt::format("HloModule m\nENTRY main {{\n  x = {}[5,130] parameter(0)\n"
                                  "  ROOT r = {}[5,130] convert(x)\n}}\n", f, t)},
          {"bitcast-convert", fmt::format("HloModule m\nENTRY main {{\n  x = {}{} parameter(0)\n"
                                          "  ROOT r = {}{} bitcast-convert(x)\n}}\n", f, inDims, t, outDims)}};
      for (const auto& [op, text] : cases) {
        if (!interpreterRuns(text)) continue;
        E2eRun r = runCase(text);
        std::string label = fmt::format("{} {} -> {}", op, f, t);
        // A pair with a known-gap type is not checked: some of its pairs
        // work, the others are refused or wrong.
        if (isKnownGap(op, from) || isKnownGap(op, to)) {
          ++refused;
          continue;
        }
        if (!r.error.empty()) {
          failures.push_back(fmt::format("{}: {}", label, r.error.substr(0, r.error.find('\n'))));
        } else if (r.bitMismatches != 0 && !(op == "convert" && r.maxErr == 0)) {
          // Bit-exact, except that a NaN may come out with another payload.
          failures.push_back(fmt::format("{}: {} elements differ, first {}", label, r.bitMismatches, r.bitWhere));
        } else {
          ++passed;
        }
      }
    }
  }
  RecordProperty("passed", passed);
  EXPECT_TRUE(failures.empty()) << failures.size() << " conversions fail (" << passed << " pass, " << refused
                                << " with a known-gap type unchecked):\n" << joined(failures);
  EXPECT_GT(passed, 900);
}

}  // namespace
}  // namespace tpu::codegen
