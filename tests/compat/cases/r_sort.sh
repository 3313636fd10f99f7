# R: its own allocator for vectors (large ones from malloc), a mark-sweep collector over
# hundreds of thousands of small objects, and Rscript starting R through shell scripts (a job of
# a dozen process images). Sorts 20 M doubles, builds 200 k small vectors, multiplies matrices.
description="R: sort 20 M doubles, 200 k small vectors, a 2000x2000 matrix product"
packages=(r-base-core)
program="Rscript"
nobody=yes
cost=15
prepare() {
  cat >sort.R <<'R'
set.seed(3)
x <- runif(2e7)
s <- sort(x)
l <- lapply(1:200000, function(i) c(i, i * 2))
m <- matrix(runif(4e6), 2000)
cat(sprintf("%.6f %.6f %d %.4f\n", s[1], s[length(s)], length(l), sum(m %*% m[, 1:10])))
R
}
command=(Rscript "$IN/sort.R")
