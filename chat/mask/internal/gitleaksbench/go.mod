module github.com/prchat/prchat/chat/mask/internal/gitleaksbench

go 1.26.8

require (
	github.com/prchat/prchat v0.0.0
	github.com/zricethezav/gitleaks/v8 v8.30.1
)

replace github.com/prchat/prchat => ../../../..
