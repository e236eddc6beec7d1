// ScalaCN's performance model of a device, fitted to measured points by nonlinear least
// squares (GSL's trust-region Levenberg-Marquardt):
//   BW(Ql, Qr)  = u * exp(-((Ql - m)^2 + (Qr - n)^2) / (2 v^2)) + w
//   LAT(Ql, Qr) = a * Ql + b * Qr + c
// The goodness of a fit is its coefficient of determination R^2 = 1 - SS_res / SS_tot (1 when
// the model explains every point; 0 or below when it explains nothing; 0 when SS_tot is 0
// and the fit is not exact).
#pragma once

#include <span>

namespace wharf::scala {

struct PlanePoint {
  double ql = 0;
  double qr = 0;
  double value = 0;
};

struct BwModel {
  double u = 0, v = 1, m = 0, n = 0, w = 0;
  double r2 = 0;
  bool fitted = false;  // false: fewer than 5 points, or the solver failed
  double at(double ql, double qr) const;
};

struct LatModel {
  double a = 0, b = 0, c = 0;
  double r2 = 0;
  bool fitted = false;  // false: fewer than 3 points or the points are collinear in (ql, qr)
  double at(double ql, double qr) const;
};

// Several starts (from the data's extremes and spread), the best kept; v is kept positive.
BwModel fit_bw(std::span<const PlanePoint> points);
// Ordinary linear least squares (GSL's truncated SVD solver, gsl_multifit_linear_tsvd, which
// also tells the design's rank).
LatModel fit_lat(std::span<const PlanePoint> points);

}  // namespace wharf::scala
