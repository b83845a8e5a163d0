/* Compiled twin of the CQB policies' per-round work (cqb.estimation.LogisticEstimator
 * and cqb.policies.optimistic.OptimisticScorer with kernel = "compiled").
 *
 * The Python classes own every array; a Core holds buffers on them and updates
 * them in place, so everything a test or a policy reads (θ, V⁻¹, widths, the
 * cached scores) stays a numpy array. The numpy path (kernel = "numpy") is the
 * reference: tests run both on the same data and compare every round.
 *
 * What is here: the cached UCB refresh and argmax, the estimator update (store
 * the sample; an exact warm-started Newton refit on the geometric schedule,
 * else one online Newton step with Sherman–Morrison on V⁻¹ and H⁻¹) and the
 * confidence width; and the rejection sampler's acceptance screen
 * (screen_contexts); and Filippi's projection onto the ball (filippi_slsqp:
 * SciPy's SLSQP routine driven from C on numpy's own BLAS and tanh, so the
 * iterates are numpy's to the bit), which Python calls when update() reports
 * the MLE outside the ball.
 *
 * Plain C over the buffer protocol: no numpy headers at build time. Loops sum
 * in a fixed order; build with -ffp-contract=off so the results do not depend on
 * whether the target has FMA.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <dlfcn.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#define REFITTED 1
#define OUTSIDE_BALL 2

typedef struct {
    PyObject_HEAD
    Py_ssize_t n_servers, dim, capacity;
    /* estimator state (owned by LogisticEstimator) */
    Py_buffer views[14];
    int n_views;
    double *features;   /* (K, capacity, d) */
    double *outcomes;   /* (K, capacity) */
    int64_t *counts;    /* (K,) */
    double *mle;        /* (K, d) */
    double *theta;      /* (K, d) */
    double *inverses;   /* (K, 2, d, d): V⁻¹, H⁻¹ */
    int64_t *next_refit;/* (K,) */
    double *widths;     /* (K,) β_k */
    double *norm_bounds;/* (K,) S_k */
    double reg, kappa, delta, ridge, newton_tol, refit_growth;
    Py_ssize_t newton_max_iter, refit_min_samples;
    double *work;       /* scratch: 6d + 2d² doubles, plus capacity */
    Py_ssize_t *index;  /* scratch: d indices */
    /* scorer state (owned by OptimisticScorer; absent for a bare estimator) */
    int has_scorer;
    double *contexts;   /* (N, d) */
    double *means, *bonuses, *ucb; /* (N, K) */
    unsigned char *stale;          /* (K,) bool */
    Py_ssize_t n_contexts, scored_until;
    double bonus_scale;
} Core;

static double logistic(double z) { return 0.5 * (1.0 + tanh(0.5 * z)); }

/* Four partial sums (indices ≡ j mod 4), then (s0 + s1) + (s2 + s3): a fixed
 * order, and four independent chains instead of one for the pipeline. */
static double dot(const double *a, const double *b, Py_ssize_t n) {
    double s0 = 0.0, s1 = 0.0, s2 = 0.0, s3 = 0.0;
    Py_ssize_t i = 0;
    for (; i + 4 <= n; i += 4) {
        s0 += a[i] * b[i];
        s1 += a[i + 1] * b[i + 1];
        s2 += a[i + 2] * b[i + 2];
        s3 += a[i + 3] * b[i + 3];
    }
    for (; i < n; i++) s0 += a[i] * b[i];
    return (s0 + s1) + (s2 + s3);
}

/* Indices of the non-zero entries of x: one-hot and pixel features are mostly
 * zeros, and a zero term adds exactly nothing to a sum, so skipping it changes
 * no result. */
static Py_ssize_t nonzeros(const double *x, Py_ssize_t d, Py_ssize_t *index) {
    Py_ssize_t m = 0;
    for (Py_ssize_t a = 0; a < d; a++)
        if (x[a] != 0.0) index[m++] = a;
    return m;
}

/* y = M x for a symmetric d×d M (row-major). */
static void matvec(const double *m, const double *x, double *y, Py_ssize_t d) {
    for (Py_ssize_t a = 0; a < d; a++) y[a] = dot(m + a * d, x, d);
}

/* dot(a, x, n) over the n_index non-zero entries of x (nonzeros()): each term
 * goes to the partial sum dot() gives it (j mod 4 in the body, s0 in the
 * tail), in the same order. A partial sum starts at +0 and is never −0, so the
 * zero terms dot() adds (an exact ±0) change nothing: the same value, bit for
 * bit, at a fraction of the cost for one-hot and pixel features. */
static double dot_sparse(const double *a, const double *x, Py_ssize_t n, const Py_ssize_t *index,
                         Py_ssize_t n_index) {
    double s[4] = {0.0, 0.0, 0.0, 0.0};
    const Py_ssize_t body = n - n % 4;
    for (Py_ssize_t p = 0; p < n_index; p++) {
        const Py_ssize_t i = index[p];
        s[i < body ? (i & 3) : 0] += a[i] * x[i];
    }
    return (s[0] + s[1]) + (s[2] + s[3]);
}

/* matvec() for a sparse x (its non-zero entries in index), by dot_sparse(). */
static void matvec_sparse(const double *m, const double *x, const Py_ssize_t *index, Py_ssize_t n_index,
                          double *y, Py_ssize_t d) {
    for (Py_ssize_t a = 0; a < d; a++) y[a] = dot_sparse(m + a * d, x, d, index, n_index);
}

/* Take a writable C-contiguous buffer of ``count`` items of ``itemsize`` bytes. */
static void *take(Core *self, PyObject *obj, const char *name, Py_ssize_t count, Py_ssize_t itemsize,
                  int writable) {
    Py_buffer *view = &self->views[self->n_views];
    if (PyObject_GetBuffer(obj, view, (writable ? PyBUF_WRITABLE : 0) | PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0) {
        PyErr_Format(PyExc_TypeError, "cqb.sim._kernel: %s must be a%s C-contiguous array", name,
                     writable ? " writable" : "");
        return NULL;
    }
    self->n_views++;
    if (view->itemsize != itemsize || view->len != count * itemsize) {
        PyErr_Format(PyExc_ValueError, "cqb.sim._kernel: %s has %zd items of %zd bytes, expected %zd of %zd",
                     name, view->len / (view->itemsize ? view->itemsize : 1), view->itemsize, count, itemsize);
        return NULL;
    }
    return view->buf;
}

static void core_release(Core *self) {
    for (int i = 0; i < self->n_views; i++) PyBuffer_Release(&self->views[i]);
    self->n_views = 0;
    PyMem_Free(self->work);
    self->work = NULL;
    PyMem_Free(self->index);
    self->index = NULL;
}

static void core_dealloc(Core *self) {
    core_release(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int core_init(Core *self, PyObject *args, PyObject *kwds) {
    static char *kwlist[] = {"features", "outcomes", "counts", "mle", "theta", "inverses", "next_refit",
                             "widths", "norm_bounds", "reg", "kappa", "delta", "ridge", "newton_tol",
                             "newton_max_iter", "refit_growth", "refit_min_samples", NULL};
    PyObject *o[9];
    core_release(self);
    self->has_scorer = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OOOOOOOOOdddddndn", kwlist, &o[0], &o[1], &o[2], &o[3],
                                     &o[4], &o[5], &o[6], &o[7], &o[8], &self->reg, &self->kappa,
                                     &self->delta, &self->ridge, &self->newton_tol, &self->newton_max_iter,
                                     &self->refit_growth, &self->refit_min_samples))
        return -1;
    /* Shapes come from mle (K, d) and outcomes (K, capacity). */
    Py_buffer probe;
    if (PyObject_GetBuffer(o[3], &probe, PyBUF_ND) < 0) return -1;
    if (probe.ndim != 2) { PyBuffer_Release(&probe); PyErr_SetString(PyExc_ValueError, "cqb.sim._kernel: mle must be 2-D"); return -1; }
    self->n_servers = probe.shape[0];
    self->dim = probe.shape[1];
    PyBuffer_Release(&probe);
    if (PyObject_GetBuffer(o[1], &probe, PyBUF_ND) < 0) return -1;
    if (probe.ndim != 2) { PyBuffer_Release(&probe); PyErr_SetString(PyExc_ValueError, "cqb.sim._kernel: outcomes must be 2-D"); return -1; }
    self->capacity = probe.shape[1];
    PyBuffer_Release(&probe);
    Py_ssize_t K = self->n_servers, d = self->dim, n = self->capacity;
    if (!(self->features = take(self, o[0], "features", K * n * d, 8, 1))) return -1;
    if (!(self->outcomes = take(self, o[1], "outcomes", K * n, 8, 1))) return -1;
    if (!(self->counts = take(self, o[2], "counts", K, 8, 1))) return -1;
    if (!(self->mle = take(self, o[3], "mle", K * d, 8, 1))) return -1;
    if (!(self->theta = take(self, o[4], "theta", K * d, 8, 1))) return -1;
    if (!(self->inverses = take(self, o[5], "inverses", K * 2 * d * d, 8, 1))) return -1;
    if (!(self->next_refit = take(self, o[6], "next_refit", K, 8, 1))) return -1;
    if (!(self->widths = take(self, o[7], "widths", K, 8, 1))) return -1;
    if (!(self->norm_bounds = take(self, o[8], "norm_bounds", K, 8, 1))) return -1;
    self->work = PyMem_Malloc(sizeof(double) * (size_t)(6 * d + 2 * d * d + n + 1));
    self->index = PyMem_Malloc(sizeof(Py_ssize_t) * (size_t)(d + 1));
    if (!self->work || !self->index) { PyErr_NoMemory(); return -1; }
    return 0;
}

/* Cholesky factor L (lower, row-major) of the symmetric positive definite a, in
 * place of l. Each entry is the plain loop's sum, in its order (m = 0, 1, …,
 * j − 1); four rows go through the columns left of their diagonal block
 * together, so that four independent sums are in flight instead of one. */
static int cholesky(const double *a, double *l, Py_ssize_t d) {
    for (Py_ssize_t i0 = 0; i0 < d; i0 += 4) {
        const Py_ssize_t rows = d - i0 < 4 ? d - i0 : 4;
        for (Py_ssize_t j = 0; j < i0; j++) {
            const double *lj = l + j * d;
            double s[4];
            for (Py_ssize_t r = 0; r < rows; r++) s[r] = a[(i0 + r) * d + j];
            if (rows == 4) {
                const double *l0 = l + i0 * d, *l1 = l0 + d, *l2 = l1 + d, *l3 = l2 + d;
                for (Py_ssize_t m = 0; m < j; m++) {
                    const double v = lj[m];
                    s[0] -= l0[m] * v;
                    s[1] -= l1[m] * v;
                    s[2] -= l2[m] * v;
                    s[3] -= l3[m] * v;
                }
            } else {
                for (Py_ssize_t r = 0; r < rows; r++)
                    for (Py_ssize_t m = 0; m < j; m++) s[r] -= l[(i0 + r) * d + m] * lj[m];
            }
            for (Py_ssize_t r = 0; r < rows; r++) l[(i0 + r) * d + j] = s[r] / lj[j];
        }
        for (Py_ssize_t i = i0; i < i0 + rows; i++) {
            for (Py_ssize_t j = i0; j <= i; j++) {
                double s = a[i * d + j];
                for (Py_ssize_t m = 0; m < j; m++) s -= l[i * d + m] * l[j * d + m];
                if (i == j) {
                    if (!(s > 0.0)) return -1;
                    l[i * d + i] = sqrt(s);
                } else {
                    l[i * d + j] = s / l[j * d + j];
                }
            }
            for (Py_ssize_t j = i + 1; j < d; j++) l[i * d + j] = 0.0;
        }
    }
    return 0;
}

/* Solve L Lᵀ x = b in place of b. */
static void cholesky_solve(const double *l, double *b, Py_ssize_t d) {
    for (Py_ssize_t i = 0; i < d; i++) {
        double s = b[i];
        for (Py_ssize_t m = 0; m < i; m++) s -= l[i * d + m] * b[m];
        b[i] = s / l[i * d + i];
    }
    for (Py_ssize_t i = d - 1; i >= 0; i--) {
        double s = b[i];
        for (Py_ssize_t m = i + 1; m < d; m++) s -= l[m * d + i] * b[m];
        b[i] = s / l[i * d + i];
    }
}

/* out = a⁻¹ for a symmetric positive definite a, by Cholesky: L⁻¹ column by
 * column (L y = e_j has y_i = 0 for i < j), then a⁻¹ = L⁻ᵀL⁻¹ with each entry
 * computed once for both triangles, so the result is exactly symmetric (the
 * numpy path symmetrises its inverse instead). a is overwritten. Every sum
 * runs in the order of the plain loops (m increasing from its first term);
 * out holds L⁻¹ transposed meanwhile (row j is column j of L⁻¹), so that the
 * sums read rows, four columns of L⁻¹ or four entries of a⁻¹ at a time. */
static int symmetric_inverse(double *a, double *out, double *l, Py_ssize_t d) {
    if (cholesky(a, l, d) < 0) return -1;
    double *y = out; /* y[j * d + m] = (L⁻¹)[m][j], for m ≥ j */
    for (Py_ssize_t j0 = 0; j0 < d; j0 += 4) {
        const Py_ssize_t cols = d - j0 < 4 ? d - j0 : 4, last = j0 + cols - 1;
        for (Py_ssize_t c = j0; c <= last; c++) y[c * d + c] = 1.0 / l[c * d + c];
        for (Py_ssize_t i = j0 + 1; i <= last; i++) /* rows inside the block */
            for (Py_ssize_t c = j0; c < i; c++) {
                double s = 0.0;
                for (Py_ssize_t m = c; m < i; m++) s -= l[i * d + m] * y[c * d + m];
                y[c * d + i] = s / l[i * d + i];
            }
        for (Py_ssize_t i = last + 1; i < d; i++) {
            const double *li = l + i * d;
            double s[4] = {0.0, 0.0, 0.0, 0.0};
            for (Py_ssize_t r = 0; r < cols; r++) /* each column's terms before the shared range */
                for (Py_ssize_t m = j0 + r; m < last; m++) s[r] -= li[m] * y[(j0 + r) * d + m];
            if (cols == 4) {
                const double *y0 = y + j0 * d, *y1 = y0 + d, *y2 = y1 + d, *y3 = y2 + d;
                for (Py_ssize_t m = last; m < i; m++) {
                    const double v = li[m];
                    s[0] -= v * y0[m];
                    s[1] -= v * y1[m];
                    s[2] -= v * y2[m];
                    s[3] -= v * y3[m];
                }
            } else {
                for (Py_ssize_t r = 0; r < cols; r++)
                    for (Py_ssize_t m = last; m < i; m++) s[r] -= li[m] * y[(j0 + r) * d + m];
            }
            for (Py_ssize_t r = 0; r < cols; r++) y[(j0 + r) * d + i] = s[r] / li[i];
        }
    }
    for (Py_ssize_t i = 0; i < d; i++) {
        const double *yi = y + i * d;
        for (Py_ssize_t j0 = i; j0 < d; j0 += 4) {
            const Py_ssize_t cols = d - j0 < 4 ? d - j0 : 4, last = j0 + cols - 1;
            double s[4] = {0.0, 0.0, 0.0, 0.0};
            for (Py_ssize_t r = 0; r < cols; r++)
                for (Py_ssize_t m = j0 + r; m < last; m++) s[r] += yi[m] * y[(j0 + r) * d + m];
            if (cols == 4) {
                const double *y0 = y + j0 * d, *y1 = y0 + d, *y2 = y1 + d, *y3 = y2 + d;
                for (Py_ssize_t m = last; m < d; m++) {
                    const double v = yi[m];
                    s[0] += v * y0[m];
                    s[1] += v * y1[m];
                    s[2] += v * y2[m];
                    s[3] += v * y3[m];
                }
            } else {
                for (Py_ssize_t r = 0; r < cols; r++)
                    for (Py_ssize_t m = last; m < d; m++) s[r] += yi[m] * y[(j0 + r) * d + m];
            }
            for (Py_ssize_t r = 0; r < cols; r++) {
                a[i * d + j0 + r] = s[r];
                a[(j0 + r) * d + i] = s[r];
            }
        }
    }
    memcpy(out, a, sizeof(double) * (size_t)(d * d));
    return 0;
}

/* h = Σ w_i x_i x_iᵀ + diag_add·I over the n rows of x (upper triangle summed, then mirrored). */
static void weighted_gram(const double *x, const double *w, Py_ssize_t n, Py_ssize_t d, double diag_add, double *h,
                          Py_ssize_t *index) {
    memset(h, 0, sizeof(double) * (size_t)(d * d));
    for (Py_ssize_t i = 0; i < n; i++) {
        const double *row = x + i * d;
        double wi = w ? w[i] : 1.0;
        Py_ssize_t m = nonzeros(row, d, index);
        for (Py_ssize_t p = 0; p < m; p++) {
            Py_ssize_t a = index[p];
            double wa = wi * row[a];
            double *h_row = h + a * d;
            for (Py_ssize_t q = p; q < m; q++) h_row[index[q]] += wa * row[index[q]];
        }
    }
    for (Py_ssize_t a = 0; a < d; a++) {
        h[a * d + a] += diag_add;
        for (Py_ssize_t b = a + 1; b < d; b++) h[b * d + a] = h[a * d + b];
    }
}

static int fail_not_positive_definite(Py_ssize_t server) {
    PyErr_Format(PyExc_ArithmeticError,
                 "cqb.sim._kernel: server %zd's Hessian or design matrix is not positive definite", server);
    return -1;
}

/* Exact warm-started Newton refit of server k on its data, then V⁻¹ and H⁻¹ rebuilt. */
static int refit(Core *self, Py_ssize_t k) {
    Py_ssize_t d = self->dim, n = (Py_ssize_t)self->counts[k];
    const double *x = self->features + k * self->capacity * d;
    const double *y = self->outcomes + k * self->capacity;
    double *theta = self->mle + k * d;
    double *grad = self->work;
    double *h = self->work + 6 * d, *l = h + d * d;
    double *w = l + d * d; /* n weights */
    for (Py_ssize_t it = 0; it < self->newton_max_iter; it++) {
        for (Py_ssize_t a = 0; a < d; a++) grad[a] = self->reg * theta[a];
        for (Py_ssize_t i = 0; i < n; i++) {
            double p = logistic(dot(x + i * d, theta, d));
            double r = p - y[i];
            w[i] = p * (1.0 - p);
            for (Py_ssize_t a = 0; a < d; a++) grad[a] += r * x[i * d + a];
        }
        weighted_gram(x, w, n, d, self->reg, h, self->index);
        if (cholesky(h, l, d) < 0) return fail_not_positive_definite(k);
        cholesky_solve(l, grad, d); /* grad now holds the Newton step */
        double longest = 0.0;
        for (Py_ssize_t a = 0; a < d; a++) {
            theta[a] -= grad[a];
            double size = fabs(grad[a]);
            if (size > longest) longest = size;
        }
        if (longest < self->newton_tol) break; /* the next step would be quadratically shorter */
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        double p = logistic(dot(x + i * d, theta, d));
        w[i] = p * (1.0 - p);
    }
    double *inv = self->inverses + k * 2 * d * d;
    weighted_gram(x, w, n, d, self->reg, h, self->index);
    if (symmetric_inverse(h, inv + d * d, l, d) < 0) return fail_not_positive_definite(k);
    weighted_gram(x, NULL, n, d, self->ridge, h, self->index);
    if (symmetric_inverse(h, inv, l, d) < 0) return fail_not_positive_definite(k);
    return 0;
}

/* Sherman–Morrison on V⁻¹ (weight 1) and, if weight > 0, H⁻¹ (weight μ̇); hx ← H⁻¹x after. */
static void rank_one(Core *self, Py_ssize_t k, const double *x, double weight, double *hx) {
    Py_ssize_t d = self->dim;
    double *v_inv = self->inverses + k * 2 * d * d, *h_inv = v_inv + d * d;
    double *u = self->work + 2 * d, *uh = self->work + 3 * d;
    /* mostly zeros (one-hot, pixels): the products with x over its non-zero entries */
    Py_ssize_t *index = self->index, m = nonzeros(x, d, index);
    const int sparse = 2 * m <= d;
#define MATVEC(mat, out) (sparse ? matvec_sparse(mat, x, index, m, out, d) : matvec(mat, x, out, d))
#define DOT_X(vec) (sparse ? dot_sparse(vec, x, d, index, m) : dot(vec, x, d))
    MATVEC(v_inv, u);
    double scale = 1.0 / sqrt(1.0 + DOT_X(u));
    if (weight > 0.0) {
        MATVEC(h_inv, uh);
        double scale_h = 1.0 / sqrt(1.0 / weight + DOT_X(uh));
        for (Py_ssize_t a = 0; a < d; a++) uh[a] *= scale_h;
        for (Py_ssize_t a = 0; a < d; a++)
            for (Py_ssize_t b = 0; b < d; b++) h_inv[a * d + b] -= uh[a] * uh[b];
    }
    /* u = mx·s, so outer(u, u) is exactly symmetric and V⁻¹ stays symmetric */
    for (Py_ssize_t a = 0; a < d; a++) u[a] *= scale;
    for (Py_ssize_t a = 0; a < d; a++)
        for (Py_ssize_t b = 0; b < d; b++) v_inv[a * d + b] -= u[a] * u[b];
    MATVEC(h_inv, hx);
#undef MATVEC
#undef DOT_X
}

static double confidence_width(Core *self, int64_t n_samples, double norm_bound) {
    double inner = (double)(2 * self->dim) * log1p((double)n_samples / (self->kappa * self->reg * (double)self->dim));
    inner += log((double)self->n_servers / self->delta);
    return 0.5 * self->kappa * (sqrt(inner) + norm_bound * sqrt(self->reg));
}

/* The estimator update of one sample; returns REFITTED | OUTSIDE_BALL flags or -1. */
static int update(Core *self, Py_ssize_t k, const double *x, double outcome) {
    Py_ssize_t d = self->dim;
    if (k < 0 || k >= self->n_servers) {
        PyErr_Format(PyExc_IndexError, "cqb.sim._kernel: server %zd out of range (K = %zd)", k, self->n_servers);
        return -1;
    }
    int64_t n = self->counts[k] + 1;
    if (n > self->capacity) {
        PyErr_Format(PyExc_IndexError, "cqb.sim._kernel: server %zd has room for %zd samples", k, self->capacity);
        return -1;
    }
    memcpy(self->features + (k * self->capacity + (n - 1)) * d, x, sizeof(double) * (size_t)d);
    self->outcomes[k * self->capacity + (n - 1)] = outcome;
    self->counts[k] = n;
    double *mle = self->mle + k * d;
    int flags = 0;
    if (n >= self->next_refit[k]) {
        if (refit(self, k) < 0) return -1;
        int64_t growth = (int64_t)ceil((double)n * self->refit_growth);
        self->next_refit[k] = n < self->refit_min_samples ? n + 1 : n + (growth > 1 ? growth : 1);
        flags |= REFITTED;
    } else {
        double *hx = self->work + 4 * d;
        double prob = 1.0 / (1.0 + exp(-dot(x, mle, d)));
        rank_one(self, k, x, prob * (1.0 - prob), hx);
        /* one Newton step on (quadratic model of the old data) + the new sample */
        double residual = prob - outcome;
        for (Py_ssize_t a = 0; a < d; a++) mle[a] -= residual * hx[a];
    }
    double bound = self->norm_bounds[k];
    if (sqrt(dot(mle, mle, d)) > bound)
        flags |= OUTSIDE_BALL; /* the caller projects into theta[k] */
    else
        memcpy(self->theta + k * d, mle, sizeof(double) * (size_t)d);
    self->widths[k] = confidence_width(self, n, bound);
    return flags;
}

static PyObject *core_update(Core *self, PyObject *args) {
    Py_ssize_t k;
    Py_buffer x;
    double outcome;
    if (!PyArg_ParseTuple(args, "ny*d", &k, &x, &outcome)) return NULL;
    if (x.len != self->dim * (Py_ssize_t)sizeof(double) || !PyBuffer_IsContiguous(&x, 'C')) {
        PyBuffer_Release(&x);
        PyErr_Format(PyExc_ValueError, "cqb.sim._kernel: x must be %zd contiguous float64 values", self->dim);
        return NULL;
    }
    int flags = update(self, k, (const double *)x.buf, outcome);
    PyBuffer_Release(&x);
    if (flags < 0) return NULL;
    return PyLong_FromLong(flags);
}

static PyObject *core_attach_scorer(Core *self, PyObject *args) {
    PyObject *o[5];
    if (self->has_scorer) { PyErr_SetString(PyExc_RuntimeError, "cqb.sim._kernel: a scorer is attached already"); return NULL; }
    if (!PyArg_ParseTuple(args, "OOOOOd", &o[0], &o[1], &o[2], &o[3], &o[4], &self->bonus_scale)) return NULL;
    Py_buffer probe;
    if (PyObject_GetBuffer(o[0], &probe, PyBUF_ND) < 0) return NULL;
    self->n_contexts = probe.ndim == 2 ? probe.shape[0] : -1;
    PyBuffer_Release(&probe);
    if (self->n_contexts < 0) { PyErr_SetString(PyExc_ValueError, "cqb.sim._kernel: contexts must be 2-D"); return NULL; }
    Py_ssize_t N = self->n_contexts, K = self->n_servers;
    if (!(self->contexts = take(self, o[0], "contexts", N * self->dim, 8, 0))) return NULL;
    if (!(self->means = take(self, o[1], "means", N * K, 8, 1))) return NULL;
    if (!(self->bonuses = take(self, o[2], "bonuses", N * K, 8, 1))) return NULL;
    if (!(self->ucb = take(self, o[3], "ucb", N * K, 8, 1))) return NULL;
    if (!(self->stale = take(self, o[4], "stale", K, 1, 1))) return NULL;
    self->scored_until = 0;
    self->has_scorer = 1;
    Py_RETURN_NONE;
}

static void score(Core *self, Py_ssize_t job, Py_ssize_t k) {
    Py_ssize_t d = self->dim, K = self->n_servers;
    const double *x = self->contexts + job * d;
    const double *v_inv = self->inverses + k * 2 * d * d;
    /* xᵀV⁻¹x over the non-zero entries of x */
    Py_ssize_t *index = self->index, m = nonzeros(x, d, index);
    double quad = 0.0;
    for (Py_ssize_t p = 0; p < m; p++) {
        const double *v_row = v_inv + index[p] * d;
        double inner = 0.0;
        for (Py_ssize_t q = 0; q < m; q++) inner += v_row[index[q]] * x[index[q]];
        quad += inner * x[index[p]];
    }
    double mean = logistic(dot(x, self->theta + k * d, d));
    double bonus = (self->bonus_scale * self->widths[k]) * sqrt(quad);
    self->means[job * K + k] = mean;
    self->bonuses[job * K + k] = bonus;
    self->ucb[job * K + k] = mean + bonus;
}

/* score() for four jobs at once, for dense contexts: the same sums in the same
 * order per job (a zero entry, which score() skips, adds an exact ±0), so the
 * same values, but four independent chains keep the pipeline busy where one
 * chain waits on each addition. */
static void score4(Core *self, const Py_ssize_t *jobs, Py_ssize_t k) {
    Py_ssize_t d = self->dim, K = self->n_servers;
    const double *v_inv = self->inverses + k * 2 * d * d;
    const double *x0 = self->contexts + jobs[0] * d, *x1 = self->contexts + jobs[1] * d;
    const double *x2 = self->contexts + jobs[2] * d, *x3 = self->contexts + jobs[3] * d;
    double q0 = 0.0, q1 = 0.0, q2 = 0.0, q3 = 0.0;
    for (Py_ssize_t a = 0; a < d; a++) {
        const double *v_row = v_inv + a * d;
        double i0 = 0.0, i1 = 0.0, i2 = 0.0, i3 = 0.0;
        for (Py_ssize_t b = 0; b < d; b++) {
            double v = v_row[b];
            i0 += v * x0[b];
            i1 += v * x1[b];
            i2 += v * x2[b];
            i3 += v * x3[b];
        }
        q0 += i0 * x0[a];
        q1 += i1 * x1[a];
        q2 += i2 * x2[a];
        q3 += i3 * x3[a];
    }
    const double quads[4] = {q0, q1, q2, q3};
    const double *xs[4] = {x0, x1, x2, x3};
    for (int j = 0; j < 4; j++) {
        double mean = logistic(dot(xs[j], self->theta + k * d, d));
        double bonus = (self->bonus_scale * self->widths[k]) * sqrt(quads[j]);
        self->means[jobs[j] * K + k] = mean;
        self->bonuses[jobs[j] * K + k] = bonus;
        self->ucb[jobs[j] * K + k] = mean + bonus;
    }
}

/* More than half the entries non-zero: score4's dense sums beat score()'s gather. */
static int dense(Core *self, Py_ssize_t job) {
    const double *x = self->contexts + job * self->dim;
    Py_ssize_t m = 0;
    for (Py_ssize_t a = 0; a < self->dim; a++) m += x[a] != 0.0;
    return 2 * m > self->dim;
}

/* OptimisticScorer.refresh: stale columns of queued jobs, then rows of new arrivals. */
static int refresh(Core *self, const int64_t *queue, Py_ssize_t length) {
    if (!self->has_scorer) { PyErr_SetString(PyExc_RuntimeError, "cqb.sim._kernel: no scorer attached"); return -1; }
    if (length <= 0) { PyErr_SetString(PyExc_ValueError, "cqb.sim._kernel: the queue is empty"); return -1; }
    /* Every id is checked (not only the ends): the loops below index arrays by them. */
    for (Py_ssize_t i = 0; i < length; i++)
        if (queue[i] < 0 || queue[i] >= self->n_contexts) {
            PyErr_Format(PyExc_IndexError, "cqb.sim._kernel: arrival id %lld out of range (%zd contexts)",
                         (long long)queue[i], self->n_contexts);
            return -1;
        }
    Py_ssize_t newest = (Py_ssize_t)queue[length - 1] + 1;
    Py_ssize_t fresh = newest - self->scored_until, n_old;
    if (fresh < 0) fresh = 0;
    if (fresh == 0)
        n_old = length;
    else if (fresh <= length && queue[length - fresh] == self->scored_until)
        n_old = length - fresh;
    else { /* an explored newcomer left unscored: binary search for the first unscored id */
        Py_ssize_t lo = 0, hi = length;
        while (lo < hi) {
            Py_ssize_t mid = (lo + hi) / 2;
            if (queue[mid] < self->scored_until) lo = mid + 1; else hi = mid;
        }
        n_old = lo;
    }
    for (Py_ssize_t k = 0; k < self->n_servers; k++) {
        if (!self->stale[k]) continue;
        Py_ssize_t block[4], filled = 0;
        for (Py_ssize_t i = 0; i < n_old; i++) {
            Py_ssize_t job = (Py_ssize_t)queue[i];
            if (!dense(self, job)) {
                score(self, job, k);
                continue;
            }
            block[filled++] = job;
            if (filled == 4) {
                score4(self, block, k);
                filled = 0;
            }
        }
        for (Py_ssize_t j = 0; j < filled; j++) score(self, block[j], k);
        self->stale[k] = 0;
    }
    for (Py_ssize_t job = self->scored_until; job < newest; job++)
        for (Py_ssize_t k = 0; k < self->n_servers; k++) score(self, job, k);
    if (newest > self->scored_until) self->scored_until = newest;
    return 0;
}

static int parse_queue(PyObject *obj, Py_buffer *view) {
    if (PyObject_GetBuffer(obj, view, PyBUF_C_CONTIGUOUS) < 0) return -1;
    if (view->itemsize != 8) {
        PyBuffer_Release(view);
        PyErr_SetString(PyExc_TypeError, "cqb.sim._kernel: the queue must be an int64 array");
        return -1;
    }
    return 0;
}

static PyObject *core_refresh(Core *self, PyObject *obj) {
    Py_buffer q;
    if (parse_queue(obj, &q) < 0) return NULL;
    int status = refresh(self, (const int64_t *)q.buf, q.len / 8);
    PyBuffer_Release(&q);
    if (status < 0) return NULL;
    Py_RETURN_NONE;
}

/* Refresh, then the (position, server) of the largest UCB index: row-major first
 * maximum (earliest job, then lowest server), a NaN winning as in numpy's argmax. */
static int optimistic_choice(Core *self, const int64_t *queue, Py_ssize_t length, Py_ssize_t *position,
                             Py_ssize_t *server) {
    const Py_ssize_t K = self->n_servers;
    if (refresh(self, queue, length) < 0) return -1;
    Py_ssize_t best_position = 0, best_server = 0;
    double best = self->ucb[queue[0] * K];
    if (!isnan(best)) {
        for (Py_ssize_t i = 0; i < length; i++) {
            const double *row = self->ucb + queue[i] * K;
            for (Py_ssize_t k = 0; k < K; k++) {
                double value = row[k];
                if (isnan(value)) { best_position = i; best_server = k; goto done; }
                if (value > best) { best = value; best_position = i; best_server = k; }
            }
        }
    }
done:
    *position = best_position;
    *server = best_server;
    return 0;
}

static PyObject *core_choose(Core *self, PyObject *obj) {
    Py_buffer q;
    if (parse_queue(obj, &q) < 0) return NULL;
    Py_ssize_t position, server;
    int status = optimistic_choice(self, (const int64_t *)q.buf, q.len / 8, &position, &server);
    PyBuffer_Release(&q);
    if (status < 0) return NULL;
    return Py_BuildValue("nn", position, server);
}

/* update() for the queued job ``job`` (its context row), marking server k's column stale. */
static PyObject *core_update_job(Core *self, PyObject *args) {
    Py_ssize_t job, k;
    double outcome;
    if (!PyArg_ParseTuple(args, "nnd", &job, &k, &outcome)) return NULL;
    if (!self->has_scorer) { PyErr_SetString(PyExc_RuntimeError, "cqb.sim._kernel: no scorer attached"); return NULL; }
    if (job < 0 || job >= self->n_contexts) {
        PyErr_Format(PyExc_IndexError, "cqb.sim._kernel: job %zd out of range (%zd contexts)", job, self->n_contexts);
        return NULL;
    }
    int flags = update(self, k, self->contexts + job * self->dim, outcome);
    if (flags < 0) return NULL;
    self->stale[k] = 1;
    return PyLong_FromLong(flags);
}


/* ------------------------------------------------------------------ the round loop
 *
 * play(arrivals, service, true_means, best_mean, finish, rng, explore, tau,
 *      explore_prob, explore_until, round_robin, phase1_visits,
 *      queue_length, gap, explored, departures) -> phase1_visits
 *
 * cqb.sim.simulate.run_policy for CQB-Opt (explore = PLAY_OPTIMISTIC), the
 * forced-exploration policies (PLAY_EXPLORE: ExplorationUCBPolicy, CQB-ε,
 * CQB-ε-Opt, CQB-η-2) and CQB-TS's score mode (PLAY_THOMPSON) on this Core,
 * round for round: the same queue, the same choices, the same calls of the
 * policy's generator (rng.integers(K), rng.random(), rng.standard_normal,
 * through Python, so the stream is numpy's), the same estimator updates; what update()
 * leaves to Python (a refit's count, the projection) goes to finish(server,
 * flags). The four output arrays are the PolicyRun's. tests/test_sim_kernel.py
 * compares both loops on every round. */

enum { PLAY_OPTIMISTIC = 0, PLAY_EXPLORE = 1, PLAY_THOMPSON = 2 };

typedef struct {
    double *key;  /* best true mean of the queued job */
    int64_t *id;
    Py_ssize_t size;
} MaxHeap;

static void heap_push(MaxHeap *h, double key, int64_t id) {
    Py_ssize_t i = h->size++;
    while (i > 0) {
        Py_ssize_t parent = (i - 1) / 2;
        if (!(h->key[parent] < key)) break;
        h->key[i] = h->key[parent];
        h->id[i] = h->id[parent];
        i = parent;
    }
    h->key[i] = key;
    h->id[i] = id;
}

static void heap_pop(MaxHeap *h) {
    double key = h->key[--h->size];
    int64_t id = h->id[h->size];
    Py_ssize_t i = 0;
    for (;;) {
        Py_ssize_t child = 2 * i + 1;
        if (child >= h->size) break;
        if (child + 1 < h->size && h->key[child + 1] > h->key[child]) child++;
        if (!(h->key[child] > key)) break;
        h->key[i] = h->key[child];
        h->id[i] = h->id[child];
        i = child;
    }
    h->key[i] = key;
    h->id[i] = id;
}

static int call_integers(PyObject *rng, Py_ssize_t n, Py_ssize_t *out) {
    PyObject *value = PyObject_CallMethod(rng, "integers", "n", n);
    if (value == NULL) return -1;
    *out = PyNumber_AsSsize_t(value, PyExc_OverflowError);
    Py_DECREF(value);
    return (*out == -1 && PyErr_Occurred()) ? -1 : 0;
}

static int call_random(PyObject *rng, double *out) {
    PyObject *value = PyObject_CallMethod(rng, "random", NULL);
    if (value == NULL) return -1;
    *out = PyFloat_AsDouble(value);
    Py_DECREF(value);
    return (*out == -1.0 && PyErr_Occurred()) ? -1 : 0;
}

/* CQB-TS with ts_mode "score": a standard normal per queued (job, server) from
 * rng.standard_normal((length, K)), the score mean + bonus · noise, and the
 * row-major first maximum, a NaN winning (ThompsonPolicy.choose's argmax). */
static int thompson_choice(Core *self, PyObject *rng, const int64_t *queue, Py_ssize_t length,
                           Py_ssize_t *position, Py_ssize_t *server) {
    const Py_ssize_t K = self->n_servers;
    if (refresh(self, queue, length) < 0) return -1;
    PyObject *noise_obj = PyObject_CallMethod(rng, "standard_normal", "((nn))", length, K);
    if (noise_obj == NULL) return -1;
    Py_buffer noise;
    if (PyObject_GetBuffer(noise_obj, &noise, PyBUF_C_CONTIGUOUS) < 0) {
        Py_DECREF(noise_obj);
        return -1;
    }
    if (noise.itemsize != 8 || noise.len != length * K * 8) {
        PyBuffer_Release(&noise);
        Py_DECREF(noise_obj);
        PyErr_SetString(PyExc_TypeError, "cqb.sim._kernel.play: standard_normal gave no (length, K) float64 array");
        return -1;
    }
    const double *z = noise.buf;
    Py_ssize_t best_position = 0, best_server = 0;
    double best = 0.0;
    for (Py_ssize_t i = 0; i < length; i++) {
        const double *mean = self->means + queue[i] * K, *bonus = self->bonuses + queue[i] * K;
        for (Py_ssize_t k = 0; k < K; k++) {
            const double score = mean[k] + bonus[k] * z[i * K + k];
            if (isnan(score)) { best_position = i; best_server = k; goto done; }
            if ((i == 0 && k == 0) || score > best) { best = score; best_position = i; best_server = k; }
        }
    }
done:
    PyBuffer_Release(&noise);
    Py_DECREF(noise_obj);
    *position = best_position;
    *server = best_server;
    return 0;
}

/* What run_rounds asks of a policy: its choice in a round with a queue, and
 * what it learns from the outcome. Each policy's struct starts with one. */
typedef struct Chooser {
    int (*choose)(struct Chooser *self, Py_ssize_t t, const int64_t *queue, Py_ssize_t length, int new_arrival,
                  Py_ssize_t *position, Py_ssize_t *server, int *explored);
    int (*observe)(struct Chooser *self, int64_t job, Py_ssize_t server, int success);
} Chooser;

enum { TRACE_VIEWS = 8 };

/* The buffers of (arrivals, service, true_means, best_mean, queue_length, gap,
 * explored, departures), checked; the number held, or -1 (all released). */
static int open_round_views(PyObject *const *objects, Py_buffer *views, Py_ssize_t K, Py_ssize_t max_jobs) {
    static const Py_ssize_t itemsizes[TRACE_VIEWS] = {1, 8, 8, 8, 8, 8, 1, 1};
    int held = 0;
    for (; held < TRACE_VIEWS; held++) {
        int flags = PyBUF_C_CONTIGUOUS | (held >= 4 ? PyBUF_WRITABLE : 0);
        if (PyObject_GetBuffer(objects[held], &views[held], flags) < 0) goto fail;
        if (views[held].itemsize != itemsizes[held]) {
            PyBuffer_Release(&views[held]);
            PyErr_SetString(PyExc_TypeError, "cqb.sim._kernel: the round loop takes arrivals bool, service float64, "
                            "true_means float64 (N, K), best_mean float64, outputs int64/float64/bool/bool");
            goto fail;
        }
    }
    const Py_ssize_t horizon = views[0].len, n_jobs = views[3].len / 8;
    if (views[1].len != horizon * 8 || views[2].len != n_jobs * K * 8 || views[4].len != horizon * 8
        || views[5].len != horizon * 8 || views[6].len != horizon || views[7].len != horizon || n_jobs > max_jobs) {
        PyErr_SetString(PyExc_ValueError, "cqb.sim._kernel: round loop arrays of inconsistent lengths");
        goto fail;
    }
    return held;
fail:
    for (int i = 0; i < held; i++) PyBuffer_Release(&views[i]);
    return -1;
}

/* run_policy's loop over the views of open_round_views: Q(t) before the
 * decision, the policy's pair, the gap to the best waiting job (a max-heap of
 * the queued jobs' best true means, departed ones dropped when on top), the
 * service coin, then the arrival. gap (NaN), explored and departures come
 * filled for rounds without a decision. 0, or -1 with an exception. */
static int run_rounds(Py_buffer *views, Py_ssize_t K, Chooser *policy) {
    const Py_ssize_t horizon = views[0].len, n_jobs = views[3].len / 8;
    const unsigned char *arrivals = views[0].buf;
    const double *service = views[1].buf, *true_means = views[2].buf, *best_mean = views[3].buf;
    int64_t *queue_length = views[4].buf;
    double *gap = views[5].buf;
    unsigned char *explored = views[6].buf, *departures = views[7].buf;
    int status = -1;
    int64_t *queue = malloc(sizeof(int64_t) * (size_t)(horizon + 1));
    unsigned char *departed = calloc((size_t)n_jobs + 1, 1);
    MaxHeap heap = {malloc(sizeof(double) * (size_t)(n_jobs + 1)), malloc(sizeof(int64_t) * (size_t)(n_jobs + 1)), 0};
    if (!queue || !departed || !heap.key || !heap.id) {
        PyErr_NoMemory();
        goto done;
    }
    Py_ssize_t length = 0;
    int64_t next_id = 0;
    for (Py_ssize_t t = 1; t <= horizon; t++) {
        queue_length[t - 1] = length;
        if (length) {
            Py_ssize_t position = 0, server = 0;
            int was_explored = 0;
            if (policy->choose(policy, t, queue, length, t >= 2 && arrivals[t - 2], &position, &server,
                               &was_explored) < 0)
                goto done;
            if (server < 0 || server >= K || position < 0 || position >= length) {
                PyErr_Format(PyExc_IndexError, "cqb.sim._kernel: the policy chose (%zd, %zd) out of range",
                             position, server);
                goto done;
            }
            explored[t - 1] = (unsigned char)was_explored;
            const int64_t job = queue[position];
            const double chosen_mean = true_means[job * K + server];
            while (departed[heap.id[0]]) heap_pop(&heap);
            gap[t - 1] = heap.key[0] - chosen_mean;
            const int success = service[t - 1] <= chosen_mean;
            if (policy->observe(policy, job, server, success) < 0) goto done;
            if (success) {
                departures[t - 1] = 1;
                departed[job] = 1;
                memmove(queue + position, queue + position + 1, sizeof(int64_t) * (size_t)(length - 1 - position));
                length--;
            }
        }
        if (arrivals[t - 1]) {
            if (next_id >= n_jobs) {
                PyErr_SetString(PyExc_ValueError, "cqb.sim._kernel: more arrivals than contexts");
                goto done;
            }
            queue[length++] = next_id;
            heap_push(&heap, best_mean[next_id], next_id);
            next_id++;
        }
    }
    status = 0;
done:
    free(queue);
    free(departed);
    free(heap.key);
    free(heap.id);
    return status;
}

/* The CQB policies on a Core (Core.play's modes) */
typedef struct {
    Chooser base;
    Core *core;
    PyObject *finish, *rng;
    int mode, round_robin;
    double tau, explore_prob, explore_until;
    Py_ssize_t visits;
} CorePolicy;

static int core_policy_choose(Chooser *base, Py_ssize_t t, const int64_t *queue, Py_ssize_t length,
                              int new_arrival, Py_ssize_t *position, Py_ssize_t *server, int *explored) {
    CorePolicy *self = (CorePolicy *)base;
    const Py_ssize_t K = self->core->n_servers;
    if (self->mode == PLAY_EXPLORE && new_arrival && (double)t <= self->explore_until) {
        if ((double)t <= self->tau) {
            if (self->round_robin) {
                *server = self->visits % K;
                self->visits++;
            } else if (call_integers(self->rng, K, server) < 0) {
                return -1;
            }
            *position = length - 1;
            *explored = 1;
            return 0;
        }
        double draw;
        if (call_random(self->rng, &draw) < 0) return -1;
        if (draw < self->explore_prob) {
            if (call_integers(self->rng, K, server) < 0) return -1;
            *position = length - 1;
            *explored = 1;
            return 0;
        }
    }
    if (self->mode == PLAY_THOMPSON) return thompson_choice(self->core, self->rng, queue, length, position, server);
    return optimistic_choice(self->core, queue, length, position, server);
}

static int core_policy_observe(Chooser *base, int64_t job, Py_ssize_t server, int success) {
    CorePolicy *self = (CorePolicy *)base;
    Core *core = self->core;
    int flags = update(core, server, core->contexts + job * core->dim, success ? 1.0 : 0.0);
    if (flags < 0) return -1;
    core->stale[server] = 1;
    if (flags) {
        PyObject *done = PyObject_CallFunction(self->finish, "ni", server, flags);
        if (done == NULL) return -1;
        Py_DECREF(done);
    }
    return 0;
}

static PyObject *core_play(Core *self, PyObject *args) {
    PyObject *objects[TRACE_VIEWS];
    CorePolicy policy = {{core_policy_choose, core_policy_observe}, self, NULL, NULL, 0, 0, 0.0, 0.0, 0.0, 0};
    if (!PyArg_ParseTuple(args, "OOOOOOidddpnOOOO", &objects[0], &objects[1], &objects[2], &objects[3],
                          &policy.finish, &policy.rng, &policy.mode, &policy.tau, &policy.explore_prob,
                          &policy.explore_until, &policy.round_robin, &policy.visits, &objects[4], &objects[5],
                          &objects[6], &objects[7]))
        return NULL;
    if (!self->has_scorer) {
        PyErr_SetString(PyExc_RuntimeError, "cqb.sim._kernel: no scorer attached");
        return NULL;
    }
    Py_buffer views[TRACE_VIEWS];
    int held = open_round_views(objects, views, self->n_servers, self->n_contexts);
    if (held < 0) return NULL;
    int status = run_rounds(views, self->n_servers, &policy.base);
    for (int i = 0; i < held; i++) PyBuffer_Release(&views[i]);
    return status < 0 ? NULL : PyLong_FromSsize_t(policy.visits);
}

/* Q-UCB and Q-ThS (cqb.sim.policies.baselines.QueueBanditPolicy): the oldest
 * job, a uniform server with probability min(1, c·K·ln²t / t), else the
 * server of the largest index, the same IEEE steps as its numpy lines. */
typedef struct {
    Chooser base;
    PyObject *rng, *alpha_obj, *beta_obj;
    int sampling;
    double explore_constant;
    Py_ssize_t K;
    double *successes, *trials, *alpha, *beta;
} QueueBandit;

static int queue_bandit_choose(Chooser *base, Py_ssize_t t, const int64_t *Py_UNUSED(queue),
                               Py_ssize_t Py_UNUSED(length), int Py_UNUSED(new_arrival), Py_ssize_t *position,
                               Py_ssize_t *server, int *explored) {
    QueueBandit *self = (QueueBandit *)base;
    const Py_ssize_t K = self->K;
    const double log_t = log((double)t);
    const double squared_log = pow(log_t, 2.0); /* Python's log_t ** 2 */
    const double rate = self->explore_constant * (double)K * squared_log / (double)t;
    const double explore_prob = rate < 1.0 ? rate : 1.0;
    double draw;
    *position = 0;
    if (call_random(self->rng, &draw) < 0) return -1;
    if (draw < explore_prob) {
        *explored = 1;
        return call_integers(self->rng, K, server);
    }
    Py_ssize_t best_server = 0;
    if (self->sampling) {
        for (Py_ssize_t k = 0; k < K; k++) {
            self->alpha[k] = self->successes[k] + 1.0;
            self->beta[k] = self->trials[k] - self->successes[k] + 1.0;
        }
        PyObject *index_obj = PyObject_CallMethod(self->rng, "beta", "OO", self->alpha_obj, self->beta_obj);
        if (index_obj == NULL) return -1;
        Py_buffer index;
        if (PyObject_GetBuffer(index_obj, &index, PyBUF_C_CONTIGUOUS) < 0) {
            Py_DECREF(index_obj);
            return -1;
        }
        if (index.itemsize != 8 || index.len != K * 8) {
            PyBuffer_Release(&index);
            Py_DECREF(index_obj);
            PyErr_SetString(PyExc_TypeError, "cqb.sim._kernel: rng.beta gave no (K,) float64 array");
            return -1;
        }
        const double *value = index.buf;
        double best = value[0];
        if (!isnan(best))
            for (Py_ssize_t k = 1; k < K; k++) {
                if (isnan(value[k])) { best_server = k; break; }
                if (value[k] > best) { best = value[k]; best_server = k; }
            }
        PyBuffer_Release(&index);
        Py_DECREF(index_obj);
    } else {
        double best = 0.0;
        for (Py_ssize_t k = 0; k < K; k++) {
            const double n = self->trials[k];
            const double value = n > 0 ? self->successes[k] / n + sqrt(squared_log / (2.0 * n)) : HUGE_VAL;
            if (k == 0 || value > best) { best = value; best_server = k; }
        }
    }
    *server = best_server;
    return 0;
}

static int queue_bandit_observe(Chooser *base, int64_t Py_UNUSED(job), Py_ssize_t server, int success) {
    QueueBandit *self = (QueueBandit *)base;
    self->trials[server] += 1.0;
    self->successes[server] += success ? 1.0 : 0.0;
    return 0;
}

/* play_queue_bandit(arrivals, service, true_means, best_mean, rng, sampling,
 *                   explore_constant, successes, trials, alpha, beta,
 *                   queue_length, gap, explored, departures): run_policy's loop
 * for QueueBanditPolicy; successes and trials (the policy's, float64 (K,)) are
 * updated in place, alpha and beta are work arrays for rng.beta. */
static PyObject *play_queue_bandit(PyObject *Py_UNUSED(module), PyObject *args) {
    PyObject *objects[TRACE_VIEWS], *successes_obj, *trials_obj;
    QueueBandit policy = {{queue_bandit_choose, queue_bandit_observe}, NULL, NULL, NULL, 0, 0.0, 0,
                          NULL, NULL, NULL, NULL};
    if (!PyArg_ParseTuple(args, "OOOOOpdOOOOOOOO", &objects[0], &objects[1], &objects[2], &objects[3], &policy.rng,
                          &policy.sampling, &policy.explore_constant, &successes_obj, &trials_obj, &policy.alpha_obj,
                          &policy.beta_obj, &objects[4], &objects[5], &objects[6], &objects[7]))
        return NULL;
    Py_buffer state[4];
    PyObject *state_objects[4] = {successes_obj, trials_obj, policy.alpha_obj, policy.beta_obj};
    int held_state = 0;
    PyObject *result = NULL;
    for (; held_state < 4; held_state++) {
        if (PyObject_GetBuffer(state_objects[held_state], &state[held_state], PyBUF_C_CONTIGUOUS | PyBUF_WRITABLE) < 0)
            goto done;
        if (state[held_state].itemsize != 8 || state[held_state].len != state[0].len) {
            PyBuffer_Release(&state[held_state]);
            PyErr_SetString(PyExc_TypeError, "cqb.sim._kernel: successes, trials, alpha, beta: float64 (K,)");
            goto done;
        }
    }
    policy.K = state[0].len / 8;
    policy.successes = state[0].buf;
    policy.trials = state[1].buf;
    policy.alpha = state[2].buf;
    policy.beta = state[3].buf;
    if (policy.K < 1) {
        PyErr_SetString(PyExc_ValueError, "cqb.sim._kernel: no servers");
        goto done;
    }
    {
        Py_buffer views[TRACE_VIEWS];
        int held = open_round_views(objects, views, policy.K, PY_SSIZE_T_MAX);
        if (held < 0) goto done;
        int status = run_rounds(views, policy.K, &policy.base);
        for (int i = 0; i < held; i++) PyBuffer_Release(&views[i]);
        if (status == 0) {
            Py_INCREF(Py_None);
            result = Py_None;
        }
    }
done:
    for (int i = 0; i < held_state; i++) PyBuffer_Release(&state[i]);
    return result;
}

static PyObject *core_get_scored_until(Core *self, void *Py_UNUSED(closure)) {
    return PyLong_FromSsize_t(self->scored_until);
}

static PyMethodDef core_methods[] = {
    {"update", (PyCFunction)core_update, METH_VARARGS,
     "update(server, x, outcome) -> flags: add one sample (x: d contiguous float64); "
     "flags bit 0: refitted, bit 1: the MLE left the ball (theta[server] not written)"},
    {"attach_scorer", (PyCFunction)core_attach_scorer, METH_VARARGS,
     "attach_scorer(contexts, means, bonuses, ucb, stale, bonus_scale)"},
    {"refresh", (PyCFunction)core_refresh, METH_O, "refresh(queue): the cached scores of the queued jobs"},
    {"choose", (PyCFunction)core_choose, METH_O, "choose(queue) -> (position, server) of the largest index"},
    {"play", (PyCFunction)core_play, METH_VARARGS,
     "play(arrivals, service, true_means, best_mean, finish, rng, explore, tau, explore_prob, explore_until, "
     "round_robin, phase1_visits, queue_length, gap, explored, departures) -> phase1_visits: the round loop"},
    {"update_job", (PyCFunction)core_update_job, METH_VARARGS,
     "update_job(job, server, outcome) -> flags: update() with the job's context"},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef core_getset[] = {
    {"scored_until", (getter)core_get_scored_until, NULL, "arrival ids below this have full rows", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject CoreType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "cqb.sim._kernel.Core",
    .tp_basicsize = sizeof(Core),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "In-place compiled updates of a LogisticEstimator's (and its scorer's) arrays.",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)core_init,
    .tp_dealloc = (destructor)core_dealloc,
    .tp_methods = core_methods,
    .tp_getset = core_getset,
};

/* screen_contexts(raw, theta, low, high, codes) -> number of rows coded 1.
 *
 * The rejection sampler's acceptance test (cqb.sim.instances._passes on the
 * unit rows raw / ‖raw‖) in one pass over the raw draws, without writing the
 * unit rows: per row the largest score max_k (raw·θ_k) / ‖raw‖, coded 1 if it
 * is ≥ high, 0 if ≤ low, 2 (undecided) in between. The caller puts low and
 * high a safe distance outside today's decision band, so that a row coded 0
 * or 1 is decided the same way by numpy's scores however their sums round;
 * the few undecided rows are decided by the numpy reference itself. */
static PyObject *screen_contexts(PyObject *Py_UNUSED(module), PyObject *args) {
    PyObject *raw_obj, *theta_obj, *codes_obj;
    double low, high;
    if (!PyArg_ParseTuple(args, "OOddO", &raw_obj, &theta_obj, &low, &high, &codes_obj)) return NULL;
    Py_buffer raw, theta, codes;
    if (PyObject_GetBuffer(raw_obj, &raw, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | PyBUF_ND) < 0) return NULL;
    if (PyObject_GetBuffer(theta_obj, &theta, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | PyBUF_ND) < 0) {
        PyBuffer_Release(&raw);
        return NULL;
    }
    if (PyObject_GetBuffer(codes_obj, &codes, PyBUF_C_CONTIGUOUS | PyBUF_WRITABLE | PyBUF_FORMAT | PyBUF_ND) < 0) {
        PyBuffer_Release(&raw);
        PyBuffer_Release(&theta);
        return NULL;
    }
    PyObject *result = NULL;
    if (raw.ndim != 2 || theta.ndim != 2 || codes.ndim != 1 || raw.itemsize != 8 || theta.itemsize != 8
        || codes.itemsize != 1 || raw.shape[1] != theta.shape[1] || codes.shape[0] != raw.shape[0]
        || strcmp(raw.format, "d") != 0 || strcmp(theta.format, "d") != 0) {
        PyErr_SetString(PyExc_ValueError, "cqb.sim._kernel.screen_contexts: raw (n, d) and theta (K, d) "
                        "float64, codes (n,) uint8, all C-contiguous");
        goto done;
    }
    {
        const Py_ssize_t n = raw.shape[0], d = raw.shape[1], k_servers = theta.shape[0];
        const double *x = raw.buf, *th = theta.buf;
        unsigned char *code = codes.buf;
        Py_ssize_t accepted = 0;
        for (Py_ssize_t i = 0; i < n; i++, x += d) {
            double squares = 0.0;
            for (Py_ssize_t j = 0; j < d; j++) squares += x[j] * x[j];
            double best = -HUGE_VAL;
            for (Py_ssize_t k = 0; k < k_servers; k++) {
                const double *row = th + k * d;
                double score = 0.0;
                for (Py_ssize_t j = 0; j < d; j++) score += x[j] * row[j];
                if (score > best) best = score;
            }
            /* μ and 1/‖x‖ > 0 keep the order: scale the best score only */
            const double norm = sqrt(squares);
            const double scaled = best / norm;
            if (scaled >= high) {
                code[i] = 1;
                accepted++;
            } else if (scaled <= low) {
                code[i] = 0;
            } else {
                code[i] = 2;
            }
        }
        result = PyLong_FromSsize_t(accepted);
    }
done:
    PyBuffer_Release(&raw);
    PyBuffer_Release(&theta);
    PyBuffer_Release(&codes);
    return result;
}

/* ------------------------------------------------------------------ Filippi's projection
 *
 * filippi_slsqp: the SLSQP loop of cqb.sim.estimation._slsqp_loop with the
 * objective of filippi_projection, both in C. Every floating-point step is the
 * one numpy takes for the Python objective, in the same order: the products
 * are the calls numpy's matmul makes into its own BLAS (found by load_blas in
 * the library numpy loaded, never another one), tanh is numpy's own ufunc
 * (called on a work array), and the element-wise steps are single IEEE
 * operations. The solver step is SciPy's own routine, called with the same
 * arguments. So the iterate is the Python path's to the bit; the module checks
 * that on first use (cqb.sim.estimation), and the tests on every projection of
 * a run. Sizes n ≥ 2 samples and d ≥ 2 only: below that numpy's matmul takes
 * other routes (a dot product, its own loop), and Python runs the projection. */

#define CBLAS_ROW_MAJOR 101
#define CBLAS_COL_MAJOR 102
#define CBLAS_NO_TRANS 111
#define CBLAS_TRANS 112

/* numpy's ILP64 OpenBLAS (scipy_openblas64): 64-bit integer arguments */
typedef void (*gemv_fn)(int, int, int64_t, int64_t, double, const double *, int64_t, const double *, int64_t,
                        double, double *, int64_t);
typedef void (*gemm_fn)(int, int, int, int64_t, int64_t, int64_t, double, const double *, int64_t,
                        const double *, int64_t, double, double *, int64_t);
typedef double (*dot_fn)(int64_t, const double *, int64_t, const double *, int64_t);

static gemv_fn blas_gemv = NULL;
static gemm_fn blas_gemm = NULL;
static dot_fn blas_dot = NULL;

/* load_blas(path, gemv, gemm, dot) -> bool: the three routines from the library
 * at path, only if this process has already loaded it (RTLD_NOLOAD). */
static PyObject *load_blas(PyObject *Py_UNUSED(module), PyObject *args) {
    const char *path, *gemv_name, *gemm_name, *dot_name;
    if (!PyArg_ParseTuple(args, "ssss", &path, &gemv_name, &gemm_name, &dot_name)) return NULL;
    void *library = dlopen(path, RTLD_NOW | RTLD_NOLOAD);
    if (library == NULL) Py_RETURN_FALSE;
    void *gemv = dlsym(library, gemv_name), *gemm = dlsym(library, gemm_name), *dot = dlsym(library, dot_name);
    if (gemv == NULL || gemm == NULL || dot == NULL) {
        dlclose(library);
        Py_RETURN_FALSE;
    }
    blas_gemv = (gemv_fn)gemv;
    blas_gemm = (gemm_fn)gemm;
    blas_dot = (dot_fn)dot;
    Py_RETURN_TRUE; /* the handle stays open: the routines are used for the life of the process */
}

/* numpy's `a @ b` for 1-D a, b of length n ≥ 1: DOUBLE_dot starts its sum at 0 */
static double numpy_dot(int64_t n, const double *a, const double *b) {
    double sum = 0.0;
    sum += blas_dot(n, a, 1, b, 1);
    return sum;
}

typedef struct {
    Py_ssize_t n, d;
    const double *X;        /* (n, d) C order */
    const double *design_inv; /* (d, d) C order */
    double reg;
    const double *target;   /* (d,) */
    PyObject *tanh, *z_obj; /* numpy.tanh, its (n,) work array */
    double *z;              /* z_obj's data */
    double *prob, *gram_rows, *residual, *weighted, *product, *jacobian; /* scratch */
} FilippiObjective;

/* prob ← μ(X θ), as logistic(X @ θ): 0.5 * (1 + tanh(0.5 * z)) */
static int filippi_probabilities(FilippiObjective *f, const double *theta) {
    const Py_ssize_t n = f->n, d = f->d;
    /* X @ θ: matmul's matrix @ vector, X C-contiguous -> gemv(ColMajor, Trans, d, n, lda = d) */
    blas_gemv(CBLAS_COL_MAJOR, CBLAS_TRANS, d, n, 1.0, f->X, d, theta, 1, 0.0, f->z, 1);
    for (Py_ssize_t j = 0; j < n; j++) f->z[j] = 0.5 * f->z[j];
    PyObject *out = PyObject_CallFunctionObjArgs(f->tanh, f->z_obj, f->z_obj, NULL);
    if (out == NULL) return -1;
    Py_DECREF(out);
    for (Py_ssize_t j = 0; j < n; j++) f->prob[j] = 0.5 * (1.0 + f->z[j]);
    return 0;
}

/* out ← X.T @ prob + reg * theta: X.T is F-contiguous -> gemv(RowMajor, Trans, n, d, lda = d) */
static void filippi_moments(FilippiObjective *f, const double *theta, double *out) {
    blas_gemv(CBLAS_ROW_MAJOR, CBLAS_TRANS, f->n, f->d, 1.0, f->X, f->d, f->prob, 1, 0.0, out, 1);
    for (Py_ssize_t i = 0; i < f->d; i++) out[i] = out[i] + f->reg * theta[i];
}

/* value and gradient of ‖g(θ) − target‖²_{V⁻¹}, as filippi_projection's objective */
static int filippi_evaluate(FilippiObjective *f, const double *theta, double *value, double *gradient) {
    const Py_ssize_t n = f->n, d = f->d;
    if (filippi_probabilities(f, theta) < 0) return -1;
    filippi_moments(f, theta, f->residual);
    for (Py_ssize_t i = 0; i < d; i++) f->residual[i] = f->residual[i] - f->target[i];
    blas_gemv(CBLAS_COL_MAJOR, CBLAS_TRANS, d, d, 1.0, f->design_inv, d, f->residual, 1, 0.0, f->weighted, 1);
    /* X.T * (prob * (1 - prob)): numpy keeps X.T's (Fortran) order, element (i, j) at j*d + i */
    for (Py_ssize_t j = 0; j < n; j++) {
        const double w = f->prob[j] * (1.0 - f->prob[j]);
        for (Py_ssize_t i = 0; i < d; i++) f->gram_rows[j * d + i] = f->X[j * d + i] * w;
    }
    /* (d, n) F-order @ (n, d) C-order -> gemm(RowMajor, Trans, NoTrans, d, d, n) */
    blas_gemm(CBLAS_ROW_MAJOR, CBLAS_TRANS, CBLAS_NO_TRANS, d, d, n, 1.0, f->gram_rows, d, f->X, d, 0.0,
              f->product, d);
    /* 2.0 * (product + reg * eye(d)) */
    for (Py_ssize_t i = 0; i < d; i++)
        for (Py_ssize_t k = 0; k < d; k++)
            f->jacobian[i * d + k] = 2.0 * (f->product[i * d + k] + f->reg * (i == k ? 1.0 : 0.0));
    blas_gemv(CBLAS_COL_MAJOR, CBLAS_TRANS, d, d, 1.0, f->jacobian, d, f->weighted, 1, 0.0, gradient, 1);
    *value = numpy_dot(d, f->residual, f->weighted);
    return 0;
}

static int get_doubles(PyObject *obj, Py_buffer *view, int ndim, int writable, const char *name) {
    int flags = PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | PyBUF_ND | (writable ? PyBUF_WRITABLE : 0);
    if (PyObject_GetBuffer(obj, view, flags) < 0) return -1;
    if (view->ndim != ndim || view->itemsize != 8 || strcmp(view->format, "d") != 0) {
        PyErr_Format(PyExc_ValueError, "cqb.sim._kernel.filippi_slsqp: %s must be a C-contiguous "
                     "%d-d float64 array", name, ndim);
        PyBuffer_Release(view);
        return -1;
    }
    return 0;
}

static long state_mode(PyObject *state) {
    PyObject *mode = PyDict_GetItemString(state, "mode"); /* borrowed */
    if (mode == NULL) {
        PyErr_SetString(PyExc_KeyError, "slsqp state has no 'mode'");
        return LONG_MIN;
    }
    return PyLong_AsLong(mode);
}

/* filippi_slsqp(slsqp, tanh, X, mle, design_inv, reg, squared_bound, state, x,
 *               gradient, normals, slack, mult, lower, upper, buffer, indices, z) -> x
 *
 * x holds the start and receives the solution (SciPy's routine updates it in
 * place); state and the work arrays are _slsqp_workspace's. */
static PyObject *filippi_slsqp(PyObject *Py_UNUSED(module), PyObject *args) {
    PyObject *slsqp, *tanh_ufunc, *X_obj, *mle_obj, *dinv_obj, *state, *x_obj, *grad_obj, *normals_obj,
        *slack_obj, *mult, *lower, *upper, *buffer, *indices, *z_obj;
    double reg, squared_bound;
    if (!PyArg_ParseTuple(args, "OOOOOddOOOOOOOOOOO", &slsqp, &tanh_ufunc, &X_obj, &mle_obj, &dinv_obj, &reg,
                          &squared_bound, &state, &x_obj, &grad_obj, &normals_obj, &slack_obj, &mult, &lower,
                          &upper, &buffer, &indices, &z_obj))
        return NULL;
    if (blas_gemv == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "cqb.sim._kernel.filippi_slsqp: load_blas has not succeeded");
        return NULL;
    }
    if (!PyDict_Check(state)) {
        PyErr_SetString(PyExc_TypeError, "cqb.sim._kernel.filippi_slsqp: state must be a dict");
        return NULL;
    }
    Py_buffer views[7];
    PyObject *const objects[7] = {X_obj, mle_obj, dinv_obj, x_obj, grad_obj, slack_obj, z_obj};
    static const int ndims[7] = {2, 1, 2, 1, 1, 1, 1}, writable[7] = {0, 0, 0, 1, 1, 1, 1};
    static const char *const names[7] = {"X", "mle", "design_inv", "x", "gradient", "slack", "z"};
    int held = 0;
    PyObject *result = NULL, *value_obj = NULL;
    double *scratch = NULL, *evaluated_at = NULL;
    for (; held < 7; held++)
        if (get_doubles(objects[held], &views[held], ndims[held], writable[held], names[held]) < 0) goto done;
    /* normals: (1, d), Fortran order as SciPy wants it; row 0 is contiguous */
    Py_buffer normals;
    if (PyObject_GetBuffer(normals_obj, &normals, PyBUF_WRITABLE | PyBUF_FORMAT | PyBUF_STRIDES) < 0) goto done;
    {
        const Py_ssize_t n = views[0].shape[0], d = views[0].shape[1];
        int shapes_ok = n >= 2 && d >= 2 && views[1].shape[0] == d && views[2].shape[0] == d
                        && views[2].shape[1] == d && views[3].shape[0] == d && views[4].shape[0] == d
                        && views[5].shape[0] == 1 && views[6].shape[0] == n && normals.ndim == 2
                        && normals.shape[0] == 1 && normals.shape[1] == d && normals.itemsize == 8
                        && normals.strides[1] == 8 && strcmp(normals.format, "d") == 0;
        if (!shapes_ok) {
            PyErr_SetString(PyExc_ValueError, "cqb.sim._kernel.filippi_slsqp: X (n >= 2, d >= 2), mle (d,), "
                            "design_inv (d, d), x (d,), gradient (d,), normals (1, d), slack (1,), z (n,)");
            PyBuffer_Release(&normals);
            goto done;
        }
        scratch = malloc(sizeof(double) * (size_t)(2 * n + n * d + 4 * d + 2 * d * d));
        evaluated_at = malloc(sizeof(double) * (size_t)d);
        if (scratch == NULL || evaluated_at == NULL) {
            PyErr_NoMemory();
            PyBuffer_Release(&normals);
            goto done;
        }
        double *target = scratch;
        FilippiObjective f = {
            .n = n, .d = d, .X = views[0].buf, .design_inv = views[2].buf, .reg = reg, .target = target,
            .tanh = tanh_ufunc, .z_obj = z_obj, .z = views[6].buf,
            .prob = scratch + d, .gram_rows = scratch + d + n, .residual = scratch + d + n + n * d,
            .weighted = scratch + 2 * d + n + n * d, .product = scratch + 3 * d + n + n * d,
            .jacobian = scratch + 3 * d + n + n * d + d * d,
        };
        double *x = views[3].buf, *gradient = views[4].buf, *slack = views[5].buf, *normal = normals.buf;
        /* target = X.T @ logistic(X @ mle) + reg * mle */
        if (filippi_probabilities(&f, views[1].buf) < 0) {
            PyBuffer_Release(&normals);
            goto done;
        }
        filippi_moments(&f, views[1].buf, target);
        double value;
        memcpy(evaluated_at, x, sizeof(double) * (size_t)d);
        if (filippi_evaluate(&f, x, &value, gradient) < 0) {
            PyBuffer_Release(&normals);
            goto done;
        }
        for (Py_ssize_t i = 0; i < d; i++) normal[i] = -2.0 * x[i];
        slack[0] = squared_bound - numpy_dot(d, x, x);
        for (;;) {
            value_obj = PyFloat_FromDouble(value);
            if (value_obj == NULL) break;
            PyObject *step = PyObject_CallFunctionObjArgs(slsqp, state, value_obj, grad_obj, normals_obj,
                                                          slack_obj, x_obj, mult, lower, upper, buffer,
                                                          indices, NULL);
            Py_CLEAR(value_obj);
            if (step == NULL) break;
            Py_DECREF(step);
            long mode = state_mode(state);
            if (mode == LONG_MIN || (mode == -1 && PyErr_Occurred())) break;
            if (mode == 1 || mode == -1) {
                int moved = 0;
                for (Py_ssize_t i = 0; i < d; i++)
                    if (!(x[i] == evaluated_at[i])) moved = 1;
                if (moved) {
                    memcpy(evaluated_at, x, sizeof(double) * (size_t)d);
                    if (filippi_evaluate(&f, x, &value, gradient) < 0) break;
                }
            }
            if (mode == 1) {
                slack[0] = squared_bound - numpy_dot(d, x, x);
            } else if (mode == -1) {
                for (Py_ssize_t i = 0; i < d; i++) normal[i] = -2.0 * x[i];
            } else {
                Py_INCREF(x_obj);
                result = x_obj;
                break;
            }
        }
        PyBuffer_Release(&normals);
    }
done:
    for (int i = 0; i < held; i++) PyBuffer_Release(&views[i]);
    free(scratch);
    free(evaluated_at);
    return result;
}

static PyMethodDef module_methods[] = {
    {"screen_contexts", screen_contexts, METH_VARARGS,
     "screen_contexts(raw, theta, low, high, codes) -> rows coded 1: codes[i] = 1 if "
     "max_k raw_i·theta_k / |raw_i| >= high, 0 if <= low, 2 otherwise"},
    {"play_queue_bandit", play_queue_bandit, METH_VARARGS,
     "play_queue_bandit(arrivals, service, true_means, best_mean, rng, sampling, explore_constant, successes, "
     "trials, alpha, beta, queue_length, gap, explored, departures): Q-UCB's and Q-ThS's round loop"},
    {"load_blas", load_blas, METH_VARARGS,
     "load_blas(path, gemv, gemm, dot) -> bool: numpy's BLAS routines for filippi_slsqp"},
    {"filippi_slsqp", filippi_slsqp, METH_VARARGS,
     "filippi_slsqp(slsqp, tanh, X, mle, design_inv, reg, squared_bound, state, x, gradient, normals, "
     "slack, mult, lower, upper, buffer, indices, z) -> x: Filippi's projection (_slsqp_loop) in C"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef kernel_module = {
    PyModuleDef_HEAD_INIT, "cqb.sim._kernel", "Compiled per-round work of the CQB policies.", -1, module_methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__kernel(void) {
    if (PyType_Ready(&CoreType) < 0) return NULL;
    PyObject *module = PyModule_Create(&kernel_module);
    if (!module) return NULL;
    Py_INCREF(&CoreType);
    if (PyModule_AddObject(module, "Core", (PyObject *)&CoreType) < 0) {
        Py_DECREF(&CoreType);
        Py_DECREF(module);
        return NULL;
    }
#ifdef KERNEL_SOURCE_HASH
    PyModule_AddStringConstant(module, "SOURCE_HASH", KERNEL_SOURCE_HASH);
#endif
    PyModule_AddIntConstant(module, "REFITTED", REFITTED);
    PyModule_AddIntConstant(module, "OUTSIDE_BALL", OUTSIDE_BALL);
    return module;
}
