package cmdutil

import (
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/dcdit/dcdit/dc"
	"github.com/dcdit/dcdit/family"
	"github.com/dcdit/dcdit/gpu/accel"
	"github.com/dcdit/dcdit/params"
)

// DeviceFlags adds --device and --precision, which choose where the
// command's models run (package accel).
func DeviceFlags(cmd *cobra.Command, device, precision *string) {
	cmd.Flags().StringVar(device, "device", "", `where the models run: "cpu" (default) or "cuda" (the first CUDA GPU)`)
	cmd.Flags().StringVar(precision, "precision", "", `matrix products on a CUDA device: "fp32" (default; TF32 off) or "tf32"`)
}

// OnDevice opens the device a command's --device and --precision name and
// binds the parameter sets there; release unbinds them and closes the
// device (it does nothing on the CPU). A GPU's description goes to log.
func OnDevice(device, precision string, log io.Writer, sets ...*params.Set) (release func() error, err error) {
	if err := accel.Check(device, precision); err != nil {
		return nil, &UsageError{Err: fmt.Errorf("--device/--precision: %w", err)}
	}
	acc, err := accel.Open(device, precision)
	if err != nil {
		return nil, err
	}
	bound, err := acc.Attach(sets...)
	if err != nil {
		return nil, errors.Join(err, acc.Close())
	}
	if acc != nil && log != nil {
		fmt.Fprintf(log, "device: %s\n", acc)
	}
	return func() error { return errors.Join(bound.Close(), acc.Close()) }, nil
}

// OnDeviceDC is OnDevice for a DC model's parameters (scaffold and
// backbone) and any others, refusing first, naming the tensor, a
// backbone that runs on the CPU only (family.HostOnly) when a device is
// asked for.
func OnDeviceDC(device, precision string, log io.Writer, m *dc.Model, others ...*params.Set) (release func() error, err error) {
	if device != "" && device != accel.CPU {
		if err := family.DeviceCheck(m.Backbone); err != nil {
			return nil, fmt.Errorf("--device %s: %w", device, err)
		}
	}
	return OnDevice(device, precision, log, append([]*params.Set{m.Params, m.Backbone.Parameters()}, others...)...)
}
