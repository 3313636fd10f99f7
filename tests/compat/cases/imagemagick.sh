# An image pipeline on OpenMP threads: ImageMagick's convert (Debian's Q16 build, two threads)
# renders a seeded plasma fractal, then resizes, blurs and rotates it, each step a full image
# of 16-bit pixels in memory, and identify reads the result from a pipe. Checked by the
# pixels' signature (identify's %#). MAGICK_MAP_LIMIT=0: ImageMagick otherwise maps the files it
# reads (identify copies a pipe to a temporary file first) and its file-backed pages count in
# VmHWM, which the harness bounds by the anonymous limit (plain, identify's VmHWM is 161 MB
# with the map and 97 MB without; the pixels are the same).
description="ImageMagick convert (OpenMP): plasma 1600x1600, resize 150%, blur, rotate; pixel signature"
packages=(imagemagick)
program="convert (ImageMagick)"
nobody=yes
case_env=(MAGICK_THREAD_LIMIT=2 OMP_NUM_THREADS=2 MAGICK_MAP_LIMIT=0)
prepare() { :; }
command=(bash -c 'set -e -o pipefail
/usr/bin/convert -seed 1 -size 1600x1600 plasma:fractal -resize 150% -blur 0x3 -rotate 33 miff:- |
  /usr/bin/identify -format "%# %wx%h\n" miff:-')
