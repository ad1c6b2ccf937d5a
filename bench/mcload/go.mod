module weft/bench/mcload

go 1.22
