module github.com/fairsched/fairsched/examples/replicas

go 1.26.0

replace (
	github.com/fairsched/fairsched => ../..
	github.com/fairsched/fairsched/fairschedpg => ../../fairschedpg
)

require (
	github.com/fairsched/fairsched v0.0.0-00010101000000-000000000000
	github.com/fairsched/fairsched/fairschedpg v0.0.0-00010101000000-000000000000
)

require (
	github.com/jackc/pgpassfile v1.0.0 // indirect
	github.com/jackc/pgservicefile v0.0.0-20240606120523-5a60cdf6a761 // indirect
	github.com/jackc/pgx/v5 v5.13.0 // indirect
	github.com/jackc/puddle/v2 v2.2.3 // indirect
	golang.org/x/sync v0.23.0 // indirect
	golang.org/x/text v0.42.0 // indirect
)
