# A Lisp with a garbage collector of its own: SBCL maps its heap with syscall(SYS_mmap) at a fixed
# hint and runs Lisp on a thread whose stack (and glibc's descriptor) it mapped itself. 600 000
# strings in an equal hash table, summed, their keys sorted, then a full collection.
description="sbcl: 600k-entry equal hash table, summed and sorted, full GC"
packages=(sbcl)
program="sbcl"
cost=20
prepare() {
  cat >"$IN/table.lisp" <<'LISP'
(defun build (n)
  (let ((h (make-hash-table :test 'equal)))
    (dotimes (i n)
      (setf (gethash (format nil "k~D" i) h) (list i (* i i) (make-string 20 :initial-element #\x))))
    h))
(let* ((h (build 600000)) (s 0))
  (maphash (lambda (k v) (declare (ignore k)) (incf s (second v))) h)
  (let ((l (sort (loop for k being the hash-keys of h collect k) #'string<)))
    (format t "~D ~D ~A ~A~%" (hash-table-count h) s (first l) (car (last l)))))
(sb-ext:gc :full t)
(format t "done~%")
LISP
}
command=(sbcl --script "$IN/table.lisp")
