// See scale_search.h. The float expressions below keep llama.cpp's evaluation order on
// purpose: (w * x) * l is not (w * l) * x in the last bit.
// ref: ggml/src/ggml-quants.c (make_qx_quants with rmse_type 1, make_q3_quants with do_rmse,
//      make_qkx2_quants, make_qp_quants)
#include "quant/strict_fp.h"  // first: keep a*b+c unfused, as llama.cpp's reference build does

#include "quant/scale_search.h"

#include <algorithm>
#include <cmath>

namespace deskside::quant {
namespace {

constexpr float kGroupMaxEps = 1e-15f;  // below this the group counts as all zeros

int clamp_level(int l, int lo, int hi) { return std::max(lo, std::min(hi, l)); }

// The element of largest magnitude, with its sign (the first one on ties), and that magnitude.
float signed_absmax(int n, const float* x, float* amax) {
    float max = 0;
    *amax = 0;
    for (int i = 0; i < n; ++i) {
        const float ax = std::fabs(x[i]);
        if (ax > *amax) {
            *amax = ax;
            max = x[i];
        }
    }
    return max;
}

}  // namespace

float search_symmetric(int n, int nmax, const float* x, const float* weights, int8_t* levels) {
    float amax;
    const float max = signed_absmax(n, x, &amax);
    if (amax < kGroupMaxEps) {
        std::fill(levels, levels + n, int8_t{0});
        return 0.0f;
    }
    // Weighted least squares: for fixed levels l the best scale is sum(w x l) / sum(w l^2).
    auto fit = [&](float iscale, float* sumlx, float* suml2, bool store) {
        *sumlx = 0;
        *suml2 = 0;
        for (int i = 0; i < n; ++i) {
            const int l = clamp_level(nearest_int(iscale * x[i]), -nmax, nmax - 1);
            if (store) levels[i] = static_cast<int8_t>(l + nmax);
            const float w = weights ? weights[i] : x[i] * x[i];
            *sumlx += w * x[i] * static_cast<float>(l);
            *suml2 += w * static_cast<float>(l) * static_cast<float>(l);
        }
    };
    float sumlx, suml2;
    fit(static_cast<float>(-nmax) / max, &sumlx, &suml2, true);
    float scale = suml2 != 0.0f ? sumlx / suml2 : 0.0f;
    float best = scale * sumlx;
    for (int is = -9; is <= 9; ++is) {
        if (is == 0) continue;
        const float iscale = -(static_cast<float>(nmax) + 0.1f * static_cast<float>(is)) / max;
        fit(iscale, &sumlx, &suml2, false);
        if (suml2 > 0 && sumlx * sumlx > best * suml2) {
            fit(iscale, &sumlx, &suml2, true);
            scale = sumlx / suml2;
            best = scale * sumlx;
        }
    }
    return scale;
}

float search_symmetric_refined(int n, int nmax, const float* x, int8_t* levels) {
    float amax;
    const float max = signed_absmax(n, x, &amax);
    if (amax < kGroupMaxEps) {
        std::fill(levels, levels + n, int8_t{0});
        return 0.0f;
    }
    const float iscale = static_cast<float>(-nmax) / max;
    float sumlx = 0;
    float suml2 = 0;
    for (int i = 0; i < n; ++i) {
        const int l = clamp_level(nearest_int(iscale * x[i]), -nmax, nmax - 1);
        levels[i] = static_cast<int8_t>(l);
        const float w = x[i] * x[i];
        sumlx += w * x[i] * static_cast<float>(l);
        suml2 += w * static_cast<float>(l) * static_cast<float>(l);
    }
    // Move one element at a time to the level that is best for the scale the others imply; keep
    // the move when it raises sumlx^2 / suml2 (i.e. lowers the weighted error).
    for (int pass = 0; pass < 5; ++pass) {
        int n_changed = 0;
        for (int i = 0; i < n; ++i) {
            const float w = x[i] * x[i];
            const float li = static_cast<float>(levels[i]);
            float slx = sumlx - w * x[i] * li;
            if (slx > 0) {
                float sl2 = suml2 - w * li * li;
                const int new_l = clamp_level(nearest_int(x[i] * sl2 / slx), -nmax, nmax - 1);
                if (new_l != levels[i]) {
                    const float nl = static_cast<float>(new_l);
                    slx += w * x[i] * nl;
                    sl2 += w * nl * nl;
                    if (sl2 > 0 && slx * slx * suml2 > sumlx * sumlx * sl2) {
                        levels[i] = static_cast<int8_t>(new_l);
                        sumlx = slx;
                        suml2 = sl2;
                        ++n_changed;
                    }
                }
            }
        }
        if (n_changed == 0) break;
    }
    for (int i = 0; i < n; ++i) levels[i] = static_cast<int8_t>(levels[i] + nmax);
    return suml2 > 0.0f ? sumlx / suml2 : 0.0f;
}

float search_asymmetric(int n, int nmax, const float* x, const float* weights, uint8_t* levels, float* the_min,
                        float rmin, float rdelta, int nstep, bool use_mad) {
    float min = x[0];
    float max = x[0];
    float sum_w = weights[0];
    float sum_x = sum_w * x[0];
    for (int i = 1; i < n; ++i) {
        if (x[i] < min) min = x[i];
        if (x[i] > max) max = x[i];
        const float w = weights[i];
        sum_w += w;
        sum_x += w * x[i];
    }
    if (min > 0) min = 0;
    if (max == min) {
        std::fill(levels, levels + n, uint8_t{0});
        *the_min = -min;
        return 0.0f;
    }
    auto error_of = [&](float scale, float offset, const uint8_t* l) {
        float err = 0;
        for (int i = 0; i < n; ++i) {
            float diff = scale * static_cast<float>(l[i]) + offset - x[i];
            diff = use_mad ? std::fabs(diff) : diff * diff;
            err += weights[i] * diff;
        }
        return err;
    };
    float iscale = static_cast<float>(nmax) / (max - min);
    float scale = 1 / iscale;
    for (int i = 0; i < n; ++i) {
        levels[i] = static_cast<uint8_t>(clamp_level(nearest_int(iscale * (x[i] - min)), 0, nmax));
    }
    float best_error = error_of(scale, min, levels);
    if (nstep < 1) {
        *the_min = -min;
        return scale;
    }
    uint8_t trial[256];
    for (int is = 0; is <= nstep; ++is) {
        iscale = (rmin + rdelta * static_cast<float>(is) + static_cast<float>(nmax)) / (max - min);
        float sum_l = 0, sum_l2 = 0, sum_xl = 0;
        for (int i = 0; i < n; ++i) {
            const int l = clamp_level(nearest_int(iscale * (x[i] - min)), 0, nmax);
            trial[i] = static_cast<uint8_t>(l);
            const float w = weights[i];
            const float fl = static_cast<float>(l);
            sum_l += w * fl;
            sum_l2 += w * fl * fl;
            sum_xl += w * fl * x[i];
        }
        // Least-squares fit of scale and offset for these levels (offset clamped to <= 0).
        const float det = sum_w * sum_l2 - sum_l * sum_l;
        if (det > 0) {
            float this_scale = (sum_w * sum_xl - sum_x * sum_l) / det;
            float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / det;
            if (this_min > 0) {
                this_min = 0;
                this_scale = sum_xl / sum_l2;
            }
            const float err = error_of(this_scale, this_min, trial);
            if (err < best_error) {
                std::copy(trial, trial + n, levels);
                best_error = err;
                scale = this_scale;
                min = this_min;
            }
        }
    }
    *the_min = -min;
    return scale;
}

float search_unsigned_refined(int n, int nmax, const float* x, const float* weights, uint8_t* levels) {
    float max = 0;
    for (int i = 0; i < n; ++i) max = max > x[i] ? max : x[i];
    if (max < kGroupMaxEps) {
        std::fill(levels, levels + n, uint8_t{0});
        return 0.0f;
    }
    // The first guess is not clamped: llama.cpp stores nearest_int() of a negative x into its byte
    // levels as is, and that wrapped level enters the first error below.
    float iscale = static_cast<float>(nmax) / max;
    for (int i = 0; i < n; ++i) levels[i] = static_cast<uint8_t>(nearest_int(iscale * x[i]));
    const float first_scale = 1 / iscale;
    float best_error = 0;
    for (int i = 0; i < n; ++i) {
        const float diff = x[i] - first_scale * static_cast<float>(levels[i]);
        best_error += weights[i] * diff * diff;
    }
    for (int is = -4; is <= 4; ++is) {
        if (is == 0) continue;
        const float iscale_is = (0.1f * static_cast<float>(is) + static_cast<float>(nmax)) / max;
        const float scale_is = 1 / iscale_is;
        float err = 0;
        for (int i = 0; i < n; ++i) {
            const int l = std::min(nmax, nearest_int(iscale_is * x[i]));
            const float diff = x[i] - scale_is * static_cast<float>(l);
            err += weights[i] * diff * diff;
        }
        if (err < best_error) {
            best_error = err;
            iscale = iscale_is;
        }
    }
    float sumlx = 0;
    float suml2 = 0;
    for (int i = 0; i < n; ++i) {
        const int l = std::min(nmax, nearest_int(iscale * x[i]));
        levels[i] = static_cast<uint8_t>(l);
        const float w = weights[i];
        sumlx += w * x[i] * static_cast<float>(l);
        suml2 += w * static_cast<float>(l) * static_cast<float>(l);
    }
    // As in search_symmetric_refined: move one level at a time while sumlx^2 / suml2 grows.
    for (int pass = 0; pass < 5; ++pass) {
        int n_changed = 0;
        for (int i = 0; i < n; ++i) {
            const float w = weights[i];
            const float li = static_cast<float>(levels[i]);
            float slx = sumlx - w * x[i] * li;
            float sl2 = suml2 - w * li * li;
            if (slx > 0 && sl2 > 0) {
                const int new_l = std::min(nmax, nearest_int(x[i] * sl2 / slx));
                if (new_l != levels[i]) {
                    const float nl = static_cast<float>(new_l);
                    slx += w * x[i] * nl;
                    sl2 += w * nl * nl;
                    if (slx * slx * suml2 > sumlx * sumlx * sl2) {
                        levels[i] = static_cast<uint8_t>(new_l);
                        sumlx = slx;
                        suml2 = sl2;
                        ++n_changed;
                    }
                }
            }
        }
        if (n_changed == 0) break;
    }
    return suml2 > 0.0f ? sumlx / suml2 : 0.0f;
}

}  // namespace deskside::quant
