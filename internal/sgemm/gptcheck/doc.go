// Package gptcheck holds only tests: it runs the GPT of package models on
// package sgemm and on gonum's BLAS, checks that the losses agree, records
// the Sgemm shapes a training step uses and, on request, times the step.
// It is apart from package sgemm so that sgemm's tests do not depend on
// the model.
package gptcheck
