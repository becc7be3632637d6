-- icl.linalg.ncm_probe: the nearest-class-mean classifier with stratified k-fold cross-validation, and ncm_fit (trained
-- on one set, applied to another), on data whose folds, means and predictions are worked out by hand, and errors.
local tl = dofile((os.getenv("ICL_SOURCE_DIR") or ".") .. "/tests/lua/testlib.lua")
local check, errs = tl.check, tl.errs
local same = tl.same
local probe = icl.linalg.ncm_probe

-- rows (first column; the second is constant), labels 1 1 2 2 1 2. With 2 folds the j-th sample of each class
-- goes to fold j mod 2: fold 0 = rows 1, 5 (class 1) and 3, 6 (class 2); fold 1 = rows 2 and 4.
-- Fold 0 is classified by the means of fold 1: 0.2 and 1.2, so row 6 (0.4) goes to class 1 (wrong).
-- Fold 1 by the means of fold 0: 0.05 and 0.7: rows 2 (0.2) and 4 (1.2) are right. Accuracy 5/6.
local X = icl.tensor.from{{0, 3}, {0.2, 3}, {1, 3}, {1.2, 3}, {0.1, 3}, {0.4, 3}}
local labels = {1, 1, 2, 2, 1, 2}
local acc, pred = probe(X, labels, {folds = 2})
check(math.abs(acc - 5 / 6) < 1e-12, "accuracy 5/6: " .. acc)
check(same(pred, {1, 1, 2, 2, 1, 1}), "predictions: " .. table.concat(pred, " "))

-- 3 folds: class 1 rows 1, 2, 5 in folds 0, 1, 2; class 2 rows 3, 4, 6 in folds 0, 1, 2.
-- fold 0 (rows 1, 3) by means (0.2 + 0.1) / 2 = 0.15 and (1.2 + 0.4) / 2 = 0.8: right, right.
-- fold 1 (rows 2, 4) by 0.05 and 0.7: right, right. fold 2 (rows 5, 6) by 0.1 and 1.1: right, 0.4 -> class 1.
acc, pred = probe(X, labels, {folds = 3})
check(math.abs(acc - 5 / 6) < 1e-12 and same(pred, {1, 1, 2, 2, 1, 1}), "3 folds")

-- separable classes in 4-d are all right; a label never seen in training (class 3 with one sample) is wrong
local rows, lab = {}, {}
for i = 1, 20 do
  local c = (i % 2) + 1
  rows[i] = {c * 10 + i * 0.01, -c, 0, 1}
  lab[i] = c
end
acc = probe(icl.tensor.from(rows), lab)
check(acc == 1, "separable classes, default 5 folds")
rows[21], lab[21] = {30, -3, 0, 1}, 3
acc, pred = probe(icl.tensor.from(rows), lab)
check(math.abs(acc - 20 / 21) < 1e-12 and pred[21] == 2, "a class absent from training is never predicted")

check(errs(function() probe(X, {1, 2}) end, "need one label per row of X"), "label count")
check(errs(function() probe(X, {1, 1, 2, 2, 1, 0}) end, "labels must be integers"), "label 0")
check(errs(function() probe(X, labels, {folds = 7}) end, "folds must be in [2, rows]"), "too many folds")
check(errs(function() probe(icl.tensor.from{1, 2}, {1, 2}) end, "expected a 2-d tensor"), "1-d input")

-- ncm_fit: means of X by class are 0.1 (rows 1, 2, 5) and 0.8667 (rows 3, 4, 6; (1 + 1.2 + 0.4) / 3); the midpoint
-- is 0.4833, so 0.48 goes to class 1 and 0.49 to class 2; a class absent from training (label 3 of no row) is
-- never predicted even for a row far past the others.
local fit = icl.linalg.ncm_fit
local P = fit(X, labels, icl.tensor.from{{0.48, 3}, {0.49, 3}, {-5, 3}, {9, 3}})
check(same(P, {1, 2, 1, 2}), "ncm_fit predictions: " .. table.concat(P, " "))
check(#fit(X, labels, icl.tensor.zeros{0, 2}) == 0, "ncm_fit of no rows: an empty list")
check(errs(function() fit(X, labels, icl.tensor.from{{1, 2, 3}}) end, "expected a 2-d tensor [rows, 2]"), "columns")
check(errs(function() fit(X, {1, 2}, X) end, "need one label per row of X"), "ncm_fit label count")

tl.done()
