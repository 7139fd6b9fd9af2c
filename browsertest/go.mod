module github.com/fairsched/fairsched/browsertest

go 1.26.0

require (
	github.com/chromedp/cdproto v0.159.0
	github.com/chromedp/chromedp v0.23.0
	github.com/fairsched/fairsched v0.0.0
	go.uber.org/goleak v1.3.0
)

require github.com/go-json-experiment/json v0.0.0-20260213210345-44df1a37e875 // indirect

replace github.com/fairsched/fairsched => ../
