set terminal pngcairo size 1000,600 noenhanced
set output 'docs/sim_tta.png'
set datafile separator ','
set key bottom right
set grid
set xlabel 'virtual hours'
set ylabel 'test accuracy'
set title 'test accuracy vs virtual time'
set arrow from graph 0, first 0.75 to graph 1, first 0.75 nohead dashtype 2 lc rgb 'gray'
plot 'runs/sim/random_s1.csv' every ::1 using 6:(strcol(3) eq 'committed' ? $7 : 1/0) with lines lw 2 title 'random'
