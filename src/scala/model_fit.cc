#include "scala/model_fit.h"

#include <gsl/gsl_errno.h>
#include <gsl/gsl_multifit.h>
#include <gsl/gsl_multifit_nlinear.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <vector>

namespace wharf::scala {
namespace {

// GSL's default error handler aborts the process; the fits report failure through `fitted`
// instead. The handler is process-wide, so it is switched off once (a thread-safe static).
void quiet_gsl() { [[maybe_unused]] static const bool off = (gsl_set_error_handler_off(), true); }

// Owners of GSL objects, each released by its own free function.
template <auto Free>
struct GslFree {
  template <class T>
  void operator()(T* p) const {
    Free(p);
  }
};
using Vector = std::unique_ptr<gsl_vector, GslFree<gsl_vector_free>>;
using Matrix = std::unique_ptr<gsl_matrix, GslFree<gsl_matrix_free>>;

bool all_finite(std::span<const PlanePoint> points) {
  return std::all_of(points.begin(), points.end(), [](const PlanePoint& p) {
    return std::isfinite(p.ql) && std::isfinite(p.qr) && std::isfinite(p.value);
  });
}

template <class Model>
double squared_error(std::span<const PlanePoint> points, const Model& model) {
  double sum = 0;
  for (const PlanePoint& p : points) {
    const double r = p.value - model.at(p.ql, p.qr);
    sum += r * r;
  }
  return sum;
}

// R^2 as model_fit.h defines it, with every value taken relative to the largest so that no
// sum of squares overflows. Rounding leaves the sums of constant data, and of an exact fit's
// residuals, a few ulps above 0; below kExact of the data's own sum of squares they count
// as 0.
template <class Model>
double r_squared(std::span<const PlanePoint> points, const Model& model) {
  constexpr double kExact = 1e-20;
  double unit = 0;
  for (const PlanePoint& p : points) unit = std::max(unit, std::abs(p.value));
  if (unit == 0) unit = 1;
  double mean = 0;
  double scale = 0;
  for (const PlanePoint& p : points) {
    mean += p.value / unit;
    scale += (p.value / unit) * (p.value / unit);
  }
  mean /= static_cast<double>(points.size());
  double ss_tot = 0;
  double ss_res = 0;
  for (const PlanePoint& p : points) {
    const double d = p.value / unit - mean;
    const double r = (p.value - model.at(p.ql, p.qr)) / unit;
    ss_tot += d * d;
    ss_res += r * r;
  }
  if (ss_tot <= kExact * scale) return ss_res <= kExact * scale ? 1 : 0;
  return 1 - ss_res / ss_tot;
}

// ---- BW: nonlinear least squares ----

// The solver's parameters. v enters the model only squared, so the solver moves s freely
// and the model reports v = |s|.
enum BwParam : size_t { kU, kS, kM, kN, kW, kBwParams };

BwModel bw_model(const gsl_vector* x) {
  BwModel model;
  model.u = gsl_vector_get(x, kU);
  model.v = std::abs(gsl_vector_get(x, kS));
  model.m = gsl_vector_get(x, kM);
  model.n = gsl_vector_get(x, kN);
  model.w = gsl_vector_get(x, kW);
  return model;
}

// Whether the solver may evaluate at x: finite, with a width to divide by.
bool bw_usable(const gsl_vector* x) {
  for (size_t i = 0; i < kBwParams; ++i)
    if (!std::isfinite(gsl_vector_get(x, i))) return false;
  return gsl_vector_get(x, kS) != 0;
}

int bw_residuals(const gsl_vector* x, void* data, gsl_vector* f) {
  if (!bw_usable(x)) return GSL_EDOM;
  const auto& points = *static_cast<const std::span<const PlanePoint>*>(data);
  const BwModel model = bw_model(x);
  for (size_t i = 0; i < points.size(); ++i)
    gsl_vector_set(f, i, model.at(points[i].ql, points[i].qr) - points[i].value);
  return GSL_SUCCESS;
}

int bw_jacobian(const gsl_vector* x, void* data, gsl_matrix* jac) {
  if (!bw_usable(x)) return GSL_EDOM;
  const auto& points = *static_cast<const std::span<const PlanePoint>*>(data);
  const double u = gsl_vector_get(x, kU);
  const double s = gsl_vector_get(x, kS);
  const double m = gsl_vector_get(x, kM);
  const double n = gsl_vector_get(x, kN);
  for (size_t i = 0; i < points.size(); ++i) {
    const double dl = points[i].ql - m;
    const double dr = points[i].qr - n;
    const double z = (dl * dl + dr * dr) / (2 * s * s);
    const double e = std::exp(-z);
    // Far in the tail e underflows to 0 while z / s may not be finite; the limit of every
    // product below is 0 there.
    const double ue = e == 0 ? 0 : u * e;
    gsl_matrix_set(jac, i, kU, e);
    gsl_matrix_set(jac, i, kS, ue == 0 ? 0 : ue * 2 * z / s);
    gsl_matrix_set(jac, i, kM, ue == 0 ? 0 : ue * dl / (s * s));
    gsl_matrix_set(jac, i, kN, ue == 0 ? 0 : ue * dr / (s * s));
    gsl_matrix_set(jac, i, kW, 1);
  }
  return GSL_SUCCESS;
}

// Starting points from the data: w at its minimum; the peak at the data's maximum or, as a
// device's bandwidth usually falls with its QPs, beyond the low ends of both axes; widths a
// few fractions of the data's extent; u such that the model meets the data's maximum.
std::vector<BwModel> bw_starts(std::span<const PlanePoint> points) {
  const auto [lo, hi] = std::minmax_element(
      points.begin(), points.end(),
      [](const PlanePoint& a, const PlanePoint& b) { return a.value < b.value; });
  const auto [ql_lo, ql_hi] =
      std::minmax_element(points.begin(), points.end(),
                          [](const PlanePoint& a, const PlanePoint& b) { return a.ql < b.ql; });
  const auto [qr_lo, qr_hi] =
      std::minmax_element(points.begin(), points.end(),
                          [](const PlanePoint& a, const PlanePoint& b) { return a.qr < b.qr; });
  double extent = std::max(ql_hi->ql - ql_lo->ql, qr_hi->qr - qr_lo->qr);
  if (extent == 0) extent = 1;
  const double rise = hi->value - lo->value;

  std::vector<BwModel> starts;
  for (const double beyond : {0.0, 0.1, 0.25}) {
    const double m = beyond == 0 ? hi->ql : ql_lo->ql - beyond * extent;
    const double n = beyond == 0 ? hi->qr : qr_lo->qr - beyond * extent;
    const double dl = hi->ql - m;
    const double dr = hi->qr - n;
    for (const double width : {0.05, 0.15, 0.4, 1.0}) {
      const double v = width * extent;
      // The Gaussian's reach at the maximum; a start that barely reaches it is no start.
      const double reach = std::exp(-(dl * dl + dr * dr) / (2 * v * v));
      if (reach < 1e-6) continue;
      BwModel start;
      start.u = rise / reach;
      start.v = v;
      start.m = m;
      start.n = n;
      start.w = lo->value;
      starts.push_back(start);
    }
  }
  return starts;
}

}  // namespace

double BwModel::at(double ql, double qr) const {
  const double dl = ql - m;
  const double dr = qr - n;
  return u * std::exp(-(dl * dl + dr * dr) / (2 * v * v)) + w;
}

double LatModel::at(double ql, double qr) const { return a * ql + b * qr + c; }

BwModel fit_bw(std::span<const PlanePoint> points) {
  constexpr size_t kMaxIter = 100;  // converging starts need some 30
  constexpr double kXtol = 1e-10;
  constexpr double kGtol = 1e-10;
  constexpr double kFtol = 0;
  BwModel best;
  if (points.size() < 5 || !all_finite(points)) return best;
  quiet_gsl();

  gsl_multifit_nlinear_fdf fdf{};
  fdf.f = bw_residuals;
  fdf.df = bw_jacobian;
  fdf.n = points.size();
  fdf.p = kBwParams;
  fdf.params = &points;
  const gsl_multifit_nlinear_parameters params = gsl_multifit_nlinear_default_parameters();
  std::unique_ptr<gsl_multifit_nlinear_workspace, GslFree<gsl_multifit_nlinear_free>> work(
      gsl_multifit_nlinear_alloc(gsl_multifit_nlinear_trust, &params, points.size(), kBwParams));
  const Vector x(gsl_vector_alloc(kBwParams));
  if (!work || !x) return best;

  double best_error = std::numeric_limits<double>::infinity();
  for (const BwModel& start : bw_starts(points)) {
    gsl_vector_set(x.get(), kU, start.u);
    gsl_vector_set(x.get(), kS, start.v);
    gsl_vector_set(x.get(), kM, start.m);
    gsl_vector_set(x.get(), kN, start.n);
    gsl_vector_set(x.get(), kW, start.w);
    if (gsl_multifit_nlinear_init(x.get(), &fdf, work.get()) != GSL_SUCCESS) continue;
    int info = 0;
    // Whatever the driver's verdict (converged, out of iterations, stuck, or a trial step
    // outside the model's domain), its position is the last accepted step and no worse than
    // the start; the residual decides.
    gsl_multifit_nlinear_driver(kMaxIter, kXtol, kGtol, kFtol, nullptr, nullptr, &info, work.get());
    const gsl_vector* at = gsl_multifit_nlinear_position(work.get());
    if (!bw_usable(at)) continue;
    const BwModel candidate = bw_model(at);
    const double error = squared_error(points, candidate);
    if (error < best_error) {
      best_error = error;
      best = candidate;
    }
  }
  if (!std::isfinite(best_error)) return BwModel{};
  best.r2 = r_squared(points, best);
  best.fitted = true;
  return best;
}

LatModel fit_lat(std::span<const PlanePoint> points) {
  // Singular values below this fraction of the largest (of the column-balanced design) are
  // rank lost to collinear points, not to the data.
  constexpr double kRankTol = 1e-9;
  LatModel model;
  if (points.size() < 3 || !all_finite(points)) return model;
  quiet_gsl();

  const size_t count = points.size();
  const Matrix design(gsl_matrix_alloc(count, 3));
  const Vector values(gsl_vector_alloc(count));
  const Vector coef(gsl_vector_alloc(3));
  const Matrix cov(gsl_matrix_alloc(3, 3));
  std::unique_ptr<gsl_multifit_linear_workspace, GslFree<gsl_multifit_linear_free>> work(
      gsl_multifit_linear_alloc(count, 3));
  if (!design || !values || !coef || !cov || !work) return model;
  for (size_t i = 0; i < count; ++i) {
    gsl_matrix_set(design.get(), i, 0, points[i].ql);
    gsl_matrix_set(design.get(), i, 1, points[i].qr);
    gsl_matrix_set(design.get(), i, 2, 1);
    gsl_vector_set(values.get(), i, points[i].value);
  }
  double chisq = 0;
  size_t rank = 0;
  if (gsl_multifit_linear_tsvd(design.get(), values.get(), kRankTol, coef.get(), cov.get(), &chisq,
                               &rank, work.get()) != GSL_SUCCESS ||
      rank < 3)
    return model;
  model.a = gsl_vector_get(coef.get(), 0);
  model.b = gsl_vector_get(coef.get(), 1);
  model.c = gsl_vector_get(coef.get(), 2);
  if (!std::isfinite(model.a) || !std::isfinite(model.b) || !std::isfinite(model.c))
    return LatModel{};
  model.r2 = r_squared(points, model);
  model.fitted = true;
  return model;
}

}  // namespace wharf::scala
