module github.com/fairsched/fairsched/benchpeers

go 1.26.0

require github.com/fairsched/fairsched v0.0.0

require github.com/alitto/pond/v2 v2.7.1

replace github.com/fairsched/fairsched => ../
