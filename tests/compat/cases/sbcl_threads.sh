# SBCL's threads under a collector that stops the world with a signal and scans each stopped
# thread's stack from the stack pointer the signal interrupted: four threads fill hash tables
# on stacks SBCL mapped, the main thread joins them (a futex wait on a word in the heap), twice,
# then a full collection. At a quarter of its peak, where the joins' waits met evicted pages.
description="sbcl: four threads build 200k-entry hash tables, joined, twice, full GC"
packages=(sbcl)
program="sbcl, 4 threads"
cost=20
limit_share=4
prepare() {
  cat >"$IN/threads.lisp" <<'LISP'
(defun work (seed)
  (let ((h (make-hash-table :test 'equal)) (s 0))
    (dotimes (i 200000)
      (setf (gethash (format nil "k~D-~D" seed i) h) (make-string 30 :initial-element #\y)))
    (maphash (lambda (k v) (incf s (+ (length k) (length v)))) h)
    s))
(dolist (base '(0 10))
  (let ((threads (loop for i below 4
                       collect (let ((i (+ base i))) (sb-thread:make-thread (lambda () (work i)))))))
    (format t "~D~%" (reduce #'+ (mapcar #'sb-thread:join-thread threads)))))
(sb-ext:gc :full t)
(format t "done~%")
LISP
}
command=(sbcl --script "$IN/threads.lisp")
