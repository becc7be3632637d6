-- icl.linalg.ncm_probe: the nearest-class-mean classifier with stratified k-fold cross-validation, on data whose
-- folds, means and predictions are worked out by hand, and its errors.
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

tl.done()
