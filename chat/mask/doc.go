// Package mask is prchat's secret masker.
package mask
