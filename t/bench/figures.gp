# make bench's figures (issue 57): gnuplot, from the data report.pl
# writes when BENCH_FIGURES names a directory (t/bench/bench.sh runs it).
#   gnuplot -e "dir='DIR'; out='IMAGES'; dbs='SQLite PostgreSQL'" t/bench/figures.gp
# (dbs: the names report.pl wrote to DIR/dbs)
# DIR/reads.dat: per database (an index block each, in dbs' order) a GET
#   row a line: "label" req/s twin-req/s p99-ms twin-p99-ms
# DIR/writes.dat: the same blocks, a write row a line: "label" writes/s
#   the database alone's writes/s (pgbench, SQLite's bare loop; NaN: none)
# Writes IMAGES/bench-reads.png and IMAGES/bench-writes.png.
if (!exists("dir") || !exists("out") || !exists("dbs")) {
    print "figures.gp: give dir, out and dbs with -e"
    exit status 2
}
n = words(dbs)

set terminal pngcairo size 1600, (420 * n + 60) font "DejaVu Sans,11" noenhanced
set style data histogram
set style histogram cluster gap 1
set style fill solid 0.85 border -1
set boxwidth 0.9
set grid ytics lc rgb "#dddddd"
set key top right horizontal
set xtics rotate by -25 scale 0
set yrange [0:*]
set offsets 0, 0, graph 0.12, 0
module = "#1f77b4"
twin   = "#9a9a9a"
alone  = "#2ca02c"

# In a cluster of two bars (gap 1) the first bar's centre is a sixth to
# the left of the cluster's.
left = -1.0 / 6

set output out . "/bench-reads.png"
set multiplot layout n, 2 title "GET routes against their static twins (medians of the rounds; higher req/s and lower p99 are better)"
do for [i = 1:n] {
    set title word(dbs, i) . ": req/s"
    set ylabel "requests/s"
    plot dir . "/reads.dat" index (i - 1) using 2:xtic(1) title "module" lc rgb module, \
         ""                 index (i - 1) using 3 title "static twin" lc rgb twin, \
         ""                 index (i - 1) using ($0 + left):2:(sprintf("%.2fx", $2 / $3)) \
                            with labels offset 0, 0.7 font ",9" notitle
    # One row (MaxRequestWorkers' clients) waits ten times the others.
    set title word(dbs, i) . ": p99 latency (log scale)"
    set ylabel "ms"
    set logscale y
    set yrange [0.5:*]
    plot dir . "/reads.dat" index (i - 1) using 4:xtic(1) title "module" lc rgb module, \
         ""                 index (i - 1) using 5 title "static twin" lc rgb twin
    unset logscale y
    set yrange [0:*]
}
unset multiplot

set terminal pngcairo size 1600, 520 font "DejaVu Sans,11" noenhanced
set output out . "/bench-writes.png"
set xtics rotate by 0
set multiplot layout 1, n title "Writes against the database alone running the same statement (medians; the figure over a module bar is its share of the database alone)"
do for [i = 1:n] {
    set title word(dbs, i)
    set ylabel "writes/s"
    plot dir . "/writes.dat" index (i - 1) using 2:xtic(1) title "module" lc rgb module, \
         ""                  index (i - 1) using 3 title "database alone" lc rgb alone, \
         ""                  index (i - 1) using ($0 + left):2:(valid(3) && $3 > 0 ? sprintf("%.2fx", $2 / $3) : "") \
                             with labels offset 0, 0.7 font ",9" notitle
}
unset multiplot
