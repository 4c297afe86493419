// SPDX-License-Identifier: Apache-2.0 OR MIT
//! The names of VM exit reasons, per vendor, as BCC's kvmexit prints them: VMX's basic exit reasons
//! (arch/x86/include/uapi/asm/vmx.h) and SVM's exit codes (arch/x86/include/uapi/asm/svm.h), without their
//! `EXIT_REASON_` / `SVM_EXIT_` prefixes. The kvm_exit event says which vendor module made it (`isa`).

/// The kvm_exit event's `isa` values (kvmexit.h).
const ISA_VMX: u32 = crate::bpf::consts::ISA_VMX as u32;
const ISA_SVM: u32 = crate::bpf::consts::ISA_SVM as u32;

const VMX: &[(u32, &str)] = &[
    (0, "EXCEPTION_NMI"),
    (1, "EXTERNAL_INTERRUPT"),
    (2, "TRIPLE_FAULT"),
    (3, "INIT_SIGNAL"),
    (4, "SIPI_SIGNAL"),
    (6, "OTHER_SMI"),
    (7, "INTERRUPT_WINDOW"),
    (8, "NMI_WINDOW"),
    (9, "TASK_SWITCH"),
    (10, "CPUID"),
    (12, "HLT"),
    (13, "INVD"),
    (14, "INVLPG"),
    (15, "RDPMC"),
    (16, "RDTSC"),
    (18, "VMCALL"),
    (19, "VMCLEAR"),
    (20, "VMLAUNCH"),
    (21, "VMPTRLD"),
    (22, "VMPTRST"),
    (23, "VMREAD"),
    (24, "VMRESUME"),
    (25, "VMWRITE"),
    (26, "VMOFF"),
    (27, "VMON"),
    (28, "CR_ACCESS"),
    (29, "DR_ACCESS"),
    (30, "IO_INSTRUCTION"),
    (31, "MSR_READ"),
    (32, "MSR_WRITE"),
    (33, "INVALID_STATE"),
    (34, "MSR_LOAD_FAIL"),
    (36, "MWAIT_INSTRUCTION"),
    (37, "MONITOR_TRAP_FLAG"),
    (39, "MONITOR_INSTRUCTION"),
    (40, "PAUSE_INSTRUCTION"),
    (41, "MCE_DURING_VMENTRY"),
    (43, "TPR_BELOW_THRESHOLD"),
    (44, "APIC_ACCESS"),
    (45, "EOI_INDUCED"),
    (46, "GDTR_IDTR"),
    (47, "LDTR_TR"),
    (48, "EPT_VIOLATION"),
    (49, "EPT_MISCONFIG"),
    (50, "INVEPT"),
    (51, "RDTSCP"),
    (52, "PREEMPTION_TIMER"),
    (53, "INVVPID"),
    (54, "WBINVD"),
    (55, "XSETBV"),
    (56, "APIC_WRITE"),
    (57, "RDRAND"),
    (58, "INVPCID"),
    (59, "VMFUNC"),
    (60, "ENCLS"),
    (61, "RDSEED"),
    (62, "PML_FULL"),
    (63, "XSAVES"),
    (64, "XRSTORS"),
    (67, "UMWAIT"),
    (68, "TPAUSE"),
    (74, "BUS_LOCK"),
    (75, "NOTIFY"),
    (77, "TDCALL"),
    (84, "MSR_READ_IMM"),
    (85, "MSR_WRITE_IMM"),
];

const SVM: &[(u32, &str)] = &[
    (0x0, "READ_CR0"),
    (0x2, "READ_CR2"),
    (0x3, "READ_CR3"),
    (0x4, "READ_CR4"),
    (0x8, "READ_CR8"),
    (0x10, "WRITE_CR0"),
    (0x12, "WRITE_CR2"),
    (0x13, "WRITE_CR3"),
    (0x14, "WRITE_CR4"),
    (0x18, "WRITE_CR8"),
    (0x20, "READ_DR0"),
    (0x21, "READ_DR1"),
    (0x22, "READ_DR2"),
    (0x23, "READ_DR3"),
    (0x24, "READ_DR4"),
    (0x25, "READ_DR5"),
    (0x26, "READ_DR6"),
    (0x27, "READ_DR7"),
    (0x30, "WRITE_DR0"),
    (0x31, "WRITE_DR1"),
    (0x32, "WRITE_DR2"),
    (0x33, "WRITE_DR3"),
    (0x34, "WRITE_DR4"),
    (0x35, "WRITE_DR5"),
    (0x36, "WRITE_DR6"),
    (0x37, "WRITE_DR7"),
    (0x40, "EXCP_BASE"),
    (0x5f, "LAST_EXCP"),
    (0x60, "INTR"),
    (0x61, "NMI"),
    (0x62, "SMI"),
    (0x63, "INIT"),
    (0x64, "VINTR"),
    (0x65, "CR0_SEL_WRITE"),
    (0x66, "IDTR_READ"),
    (0x67, "GDTR_READ"),
    (0x68, "LDTR_READ"),
    (0x69, "TR_READ"),
    (0x6a, "IDTR_WRITE"),
    (0x6b, "GDTR_WRITE"),
    (0x6c, "LDTR_WRITE"),
    (0x6d, "TR_WRITE"),
    (0x6e, "RDTSC"),
    (0x6f, "RDPMC"),
    (0x70, "PUSHF"),
    (0x71, "POPF"),
    (0x72, "CPUID"),
    (0x73, "RSM"),
    (0x74, "IRET"),
    (0x75, "SWINT"),
    (0x76, "INVD"),
    (0x77, "PAUSE"),
    (0x78, "HLT"),
    (0x79, "INVLPG"),
    (0x7a, "INVLPGA"),
    (0x7b, "IOIO"),
    (0x7c, "MSR"),
    (0x7d, "TASK_SWITCH"),
    (0x7e, "FERR_FREEZE"),
    (0x7f, "SHUTDOWN"),
    (0x80, "VMRUN"),
    (0x81, "VMMCALL"),
    (0x82, "VMLOAD"),
    (0x83, "VMSAVE"),
    (0x84, "STGI"),
    (0x85, "CLGI"),
    (0x86, "SKINIT"),
    (0x87, "RDTSCP"),
    (0x88, "ICEBP"),
    (0x89, "WBINVD"),
    (0x8a, "MONITOR"),
    (0x8b, "MWAIT"),
    (0x8c, "MWAIT_COND"),
    (0x8d, "XSETBV"),
    (0x8e, "RDPRU"),
    (0x8f, "EFER_WRITE_TRAP"),
    (0x90, "CR0_WRITE_TRAP"),
    (0x91, "CR1_WRITE_TRAP"),
    (0x92, "CR2_WRITE_TRAP"),
    (0x93, "CR3_WRITE_TRAP"),
    (0x94, "CR4_WRITE_TRAP"),
    (0x95, "CR5_WRITE_TRAP"),
    (0x96, "CR6_WRITE_TRAP"),
    (0x97, "CR7_WRITE_TRAP"),
    (0x98, "CR8_WRITE_TRAP"),
    (0x99, "CR9_WRITE_TRAP"),
    (0x9a, "CR10_WRITE_TRAP"),
    (0x9b, "CR11_WRITE_TRAP"),
    (0x9c, "CR12_WRITE_TRAP"),
    (0x9d, "CR13_WRITE_TRAP"),
    (0x9e, "CR14_WRITE_TRAP"),
    (0x9f, "CR15_WRITE_TRAP"),
    (0xa2, "INVPCID"),
    (0xa5, "BUS_LOCK"),
    (0xa6, "IDLE_HLT"),
    (0x400, "NPF"),
    (0x401, "AVIC_INCOMPLETE_IPI"),
    (0x402, "AVIC_UNACCELERATED_ACCESS"),
    (0x403, "VMGEXIT"),
];

/// VMX's flag in a basic exit reason's high bits: the VM entry failed.
const VMX_FAILED_VMENTRY: u32 = 0x8000_0000;

/// The vendor's short name, for JSON.
pub fn isa_name(isa: u32) -> String {
    match isa {
        ISA_VMX => "vmx".into(),
        ISA_SVM => "svm".into(),
        other => format!("isa{other}"),
    }
}

/// The name of exit reason `reason` of vendor `isa`; a reason the table lacks is `UNKNOWN_0x<hex>`. VMX's
/// reasons are named by their low 16 bits, with `_FAILED_VMENTRY` when that flag is set.
pub fn name(isa: u32, reason: u32) -> String {
    let (table, code) = match isa {
        ISA_VMX => (VMX, reason & 0xffff),
        ISA_SVM => (SVM, reason),
        _ => (&[][..], reason),
    };
    let Some(&(_, base)) = table.iter().find(|&&(c, _)| c == code) else {
        return format!("UNKNOWN_{reason:#x}");
    };
    if isa == ISA_VMX && reason & VMX_FAILED_VMENTRY != 0 {
        format!("{base}_FAILED_VMENTRY")
    } else {
        base.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_the_vendor() {
        assert_eq!(name(ISA_VMX, 30), "IO_INSTRUCTION");
        assert_eq!(name(ISA_VMX, 12), "HLT");
        assert_eq!(name(ISA_VMX, 0x8000_0021), "INVALID_STATE_FAILED_VMENTRY");
        assert_eq!(name(ISA_SVM, 0x7b), "IOIO");
        assert_eq!(name(ISA_SVM, 0x78), "HLT");
        assert_eq!(name(ISA_SVM, 0x400), "NPF");
        assert_eq!(name(ISA_SVM, 0x1234), "UNKNOWN_0x1234");
        assert_eq!(name(7, 30), "UNKNOWN_0x1e");
        assert_eq!(isa_name(ISA_SVM), "svm");
    }
}
